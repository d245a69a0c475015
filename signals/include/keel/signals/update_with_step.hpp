#pragma once

/// @file
/// An entity update whose write travels with another store's atomic step: an emit
/// (signal::update_and_emit), a process start (process::engine::update_and_start). The step
/// and the write happen together or not at all, in one round trip, where the store that makes
/// the step can write the entity's document; elsewhere it is repository<T>::update and then
/// the step. What the caller writes is the step; this is the loop around it that both share.
/// It lives with the signals because both steps are theirs or build on them: an emit's path
/// enters the signals once and leaves it for the engine.

#include <boost/asio/awaitable.hpp>
#include <keel/framework/documents.hpp>
#include <keel/framework/expected.hpp>
#include <keel/framework/repository.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace keel::signals {

/// How many steps update_with_step makes with the entity's write before it writes the entity by
/// repository<T>::update (which waits for a held lock) and then makes the plain step.
inline constexpr int max_step_refusals = 3;

/// Reads the entity as repository<T>::update does and applies `change`; then, when `where` is
/// set (the document's address, where the step's store can write it), `step(write)` makes the
/// step with the document_write and returns nullopt when the store refused the document
/// (changed or locked since the read: nothing happened), whereupon the entity is read again
/// and `change` runs again. When `change` returned false the write is a check of the document
/// as read (text == expected: the store writes nothing), so the step still happens only on
/// the entity `change` decided on; with no entity and no change there is nothing to check
/// (nullopt). After
/// max_step_refusals refusals, or without `where`, it is update() and then `plain()`.
/// `step(std::optional<document_write>)` returns asio::awaitable<std::optional<R>>, `plain()`
/// asio::awaitable<R>. An exception from `change` propagates before any step; one from a
/// step propagates. The documents are told the new text before the step, which may wake code
/// that reads the entity before the step returns (a process step of the same entity), and
/// take it back when the step refuses or throws: a wrong guess costs a refused write, never a
/// lost one, as every write it feeds is conditional.
///
/// With `first` = entity_read::assume_absent the first attempt does not read: `change` sees
/// no entity (a create that expects none), and a refusal (there is one) reads it.
template <model T, entity_change<T> Change, class Step, class Plain>
asio::awaitable<expected<typename std::invoke_result_t<Plain&>::value_type, model_error>>
update_with_step(repository<T>& repo, const ref<T>& entity, Change& change,
                 std::optional<document_address> where, Step& step, Plain& plain,
                 typename repository<T>::entity_read first) {
    const std::string model(model_traits<T>::name);
    for (int attempt = 0; where && attempt < max_step_refusals; ++attempt) {
        auto read = attempt == 0 ? first : repository<T>::entity_read::stored;
        auto prepared = co_await repo.prepare_update(entity, change, read);
        if (!prepared) co_return unexpected(std::move(prepared).error());
        std::optional<document_write> write;
        auto& text = prepared->text ? prepared->text : prepared->expected;
        if (text) {
            write = document_write{where->key, where->lock, prepared->expected, *text};
            repo.docs().written_elsewhere(model, entity.id(), text);
        }
        bool writes = write.has_value();
        try {
            auto done = co_await step(std::move(write));
            if (done) co_return std::move(*done);
        } catch (...) {
            if (writes) repo.docs().written_elsewhere(model, entity.id(), std::nullopt);
            throw;
        }
        repo.docs().written_elsewhere(model, entity.id(), std::nullopt);
    }
    auto updated = co_await repo.update(entity, change);
    if (!updated) co_return unexpected(std::move(updated).error());
    co_return co_await plain();
}

}  // namespace keel::signals
