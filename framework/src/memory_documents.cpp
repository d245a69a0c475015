#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/framework/memory_documents.hpp>
#include <map>
#include <utility>
#include <vector>

namespace keel {

struct memory_documents::state {
    struct entry {
        std::optional<std::string> document;
        std::uint64_t fence = 0;   // the last token given
        std::uint64_t holder = 0;  // the current holder's token; 0: free
        // Lock waiters, woken (cancelled) when the lease is given up.
        std::vector<std::shared_ptr<asio::steady_timer>> waiters;
    };
    using key = std::pair<std::string, std::string>;  // model, id
    struct key_less {  // also compares pairs of string_views: lookups copy nothing
        using is_transparent = void;
        template <class A, class B>
        bool operator()(const A& a, const B& b) const {
            std::string_view a_model = a.first, b_model = b.first;
            if (a_model != b_model) return a_model < b_model;
            return std::string_view(a.second) < std::string_view(b.second);
        }
    };

    // Entries are never erased: like Redis's fence counters, tokens must keep growing.
    std::map<key, entry, key_less> entries;
    bool closed = false;  // the memory_documents is gone

    entry* find(std::string_view model, std::string_view id) {
        auto it = entries.find(std::pair<std::string_view, std::string_view>(model, id));
        return it == entries.end() ? nullptr : &it->second;
    }
    void free(entry& e) {
        e.holder = 0;
        for (auto& waiter : std::exchange(e.waiters, {})) waiter->cancel();
    }
};

namespace {

using state = memory_documents::state;

model_error closed_error() {
    return model_error{model_error::code::unavailable,
                       "entity store: the in-memory documents were destroyed"};
}

class memory_lease final : public document_lease {
  public:
    memory_lease(std::shared_ptr<state> s, std::string model, std::string id, std::uint64_t token)
        : state_(std::move(s)), model_(std::move(model)), id_(std::move(id)), token_(token) {}
    ~memory_lease() override { release(); }

    std::uint64_t token() const noexcept override { return token_; }
    bool lost() const noexcept override { return !released_ && !current(); }

    asio::awaitable<expected<void, model_error>> save(std::string json) override {
        if (released_ || !current())
            co_return unexpected(model_error::lock_lost_on(model_ + " " + id_));
        state_->find(model_, id_)->document = std::move(json);
        co_return expected<void, model_error>{};
    }

    void release() noexcept override {
        if (std::exchange(released_, true) || !current()) return;
        state_->free(*state_->find(model_, id_));
    }

  private:
    bool current() const noexcept {
        if (state_->closed) return false;
        auto* e = state_->find(model_, id_);
        return e && e->holder == token_;
    }

    std::shared_ptr<state> state_;
    std::string model_;
    std::string id_;
    std::uint64_t token_;
    bool released_ = false;
};

}  // namespace

memory_documents::memory_documents(keel::clock& clock, std::chrono::milliseconds lock_wait)
    : clock_(clock), lock_wait_(lock_wait), state_(std::make_shared<state>()) {}

memory_documents::~memory_documents() {
    state_->closed = true;
    for (auto& [key, e] : state_->entries) state_->free(e);
}

asio::awaitable<expected<std::optional<std::string>, model_error>> memory_documents::get(
    std::string model, std::string id) {
    auto* e = state_->find(model, id);
    co_return e ? e->document : std::nullopt;
}

asio::awaitable<expected<void, model_error>> memory_documents::put(std::string model,
                                                                   std::string id,
                                                                   std::string json) {
    state_->entries[{std::move(model), std::move(id)}].document = std::move(json);
    co_return expected<void, model_error>{};
}

asio::awaitable<expected<bool, model_error>> memory_documents::remove(std::string model,
                                                                      std::string id) {
    auto* e = state_->find(model, id);
    co_return e&& std::exchange(e->document, std::nullopt).has_value();
}

asio::awaitable<expected<documents::put_if_result, model_error>> memory_documents::put_if(
    std::string model, std::string id, std::optional<std::string> expected, std::string json) {
    if (state_->closed) co_return unexpected(closed_error());
    auto& e = state_->entries[{std::move(model), std::move(id)}];
    if (e.holder != 0) co_return put_if_result::locked;
    if (e.document != expected) co_return put_if_result::changed;
    e.document = std::move(json);
    co_return put_if_result::written;
}

asio::awaitable<expected<documents::acquired, model_error>> memory_documents::lock(
    std::string model, std::string id, std::chrono::milliseconds wait) {
    using namespace asio::experimental::awaitable_operators;
    // Only locals after the first suspension: this object may be destroyed meanwhile.
    auto s = state_;
    keel::clock& clock = clock_;
    const auto deadline = clock.now() + wait;
    auto ex = co_await asio::this_coro::executor;
    for (;;) {
        if (s->closed) co_return unexpected(closed_error());
        auto& e = s->entries[{model, id}];
        if (e.holder == 0) {
            e.holder = ++e.fence;
            co_return acquired{std::make_unique<memory_lease>(s, model, id, e.holder), e.document};
        }
        if (clock.now() >= deadline)
            co_return unexpected(model_error::lock_timeout_on(model + " " + id, wait));
        auto wake = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
        e.waiters.push_back(wake);
        co_await (wake->async_wait(asio::as_tuple(asio::use_awaitable)) ||
                  clock.async_wait_until(ex, deadline, asio::as_tuple(asio::use_awaitable)));
        if (auto* after = s->find(model, id)) std::erase(after->waiters, wake);
    }
}

bool memory_documents::expire(std::string_view model, std::string_view id) {
    auto* e = state_->find(model, id);
    if (!e || e->holder == 0) return false;
    state_->free(*e);
    return true;
}

bool memory_documents::locked(std::string_view model, std::string_view id) const {
    auto* e = state_->find(model, id);
    return e && e->holder != 0;
}

}  // namespace keel
