#pragma once

// keel::documents around another, for the engine's cases: counts the conditional writes
// (put_if) the caller made itself, lets "another writer" change a document right after the
// caller read it for an update (after_next_read), and can answer one read for an update from
// the stored document instead of what this process remembers (stored_read_at: the n-th
// read, counting from 1); and the documents a case puts beside the harness's store.

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <keel/framework/documents.hpp>
#include <keel/framework/memory_documents.hpp>
#include <keel/framework/redis_documents.hpp>
#include <memory>
#include <utility>

#include "harness.hpp"

namespace keel::process::test {

class watched_documents final : public documents {
  public:
    explicit watched_documents(documents& inner) : inner_(inner) {}

    int put_ifs = 0;
    std::function<asio::awaitable<void>(documents&)> after_next_read;
    int stored_read_at = 0;
    int reads_for_update = 0;

    asio::awaitable<expected<std::optional<std::string>, model_error>> get(
        std::string model, std::string id) override {
        return inner_.get(std::move(model), std::move(id));
    }
    asio::awaitable<expected<void, model_error>> put(std::string model, std::string id,
                                                     std::string json) override {
        return inner_.put(std::move(model), std::move(id), std::move(json));
    }
    asio::awaitable<expected<bool, model_error>> remove(std::string model,
                                                        std::string id) override {
        return inner_.remove(std::move(model), std::move(id));
    }
    asio::awaitable<expected<acquired, model_error>> lock(std::string model, std::string id,
                                                          std::chrono::milliseconds wait) override {
        return inner_.lock(std::move(model), std::move(id), wait);
    }
    asio::awaitable<expected<std::optional<std::string>, model_error>> read_for_update(
        std::string model, std::string id) override {
        // (Not a conditional expression around the two co_awaits: g++ 12 miscompiles it.)
        bool stored = ++reads_for_update == stored_read_at;
        auto pending = stored ? inner_.get(std::move(model), std::move(id))
                              : inner_.read_for_update(std::move(model), std::move(id));
        auto read = co_await std::move(pending);
        if (auto hook = std::exchange(after_next_read, nullptr)) co_await hook(inner_);
        co_return read;
    }
    asio::awaitable<expected<put_if_result, model_error>> put_if(
        std::string model, std::string id, std::optional<std::string> expected,
        std::string json) override {
        ++put_ifs;
        return inner_.put_if(std::move(model), std::move(id), std::move(expected), std::move(json));
    }
    std::chrono::milliseconds lock_wait() const noexcept override { return inner_.lock_wait(); }
    std::optional<document_address> address(std::string_view model,
                                            std::string_view id) const override {
        return inner_.address(model, id);
    }
    void written_elsewhere(std::string_view model, std::string_view id,
                           std::optional<std::string> text) override {
        inner_.written_elsewhere(model, id, std::move(text));
    }

  private:
    documents& inner_;
};

// Documents on the store's own connection when it is on Redis (one server or a cluster), so
// that steps and emits can write them with their own atomic steps where the store can; in
// memory, on the harness's clock, otherwise.
inline std::unique_ptr<documents> documents_beside(harness& h) {
    if (auto* r = dynamic_cast<redis_backend*>(h.backend.get()))
        return std::make_unique<redis_documents>(r->conn);
    if (auto* c = dynamic_cast<cluster_backend*>(h.backend.get()))
        return std::make_unique<redis_documents>(c->conn);
    return std::make_unique<memory_documents>(h.clock);
}

}  // namespace keel::process::test
