#include <algorithm>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/framework/clock.hpp>
#include <map>
#include <mutex>

namespace keel {

asio::awaitable<void> clock::sleep_until(time_point when) {
    auto ex = co_await asio::this_coro::executor;
    co_await async_wait_until(ex, when, asio::use_awaitable);
}

asio::awaitable<void> clock::sleep_for(duration d) {
    return sleep_until(now() + d);
}

time_point system_clock::now() const {
    return std::chrono::system_clock::now();
}

namespace {

// Keeps the timer alive for the duration of the wait and forwards the wrapped handler's
// executor and cancellation slot, so cancellation reaches the timer.
struct timer_wait_handler {
    std::unique_ptr<asio::steady_timer> timer;
    clock::wait_handler handler;

    using executor_type = asio::associated_executor_t<clock::wait_handler>;
    using cancellation_slot_type = asio::associated_cancellation_slot_t<clock::wait_handler>;
    executor_type get_executor() const noexcept { return asio::get_associated_executor(handler); }
    cancellation_slot_type get_cancellation_slot() const noexcept {
        return asio::get_associated_cancellation_slot(handler);
    }

    void operator()(error_code ec) {
        timer.reset();
        std::move(handler)(ec);
    }
};

}  // namespace

void system_clock::do_wait_until(asio::any_io_executor ex, time_point when, wait_handler handler) {
    auto delay = when - now();
    auto timer = std::make_unique<asio::steady_timer>(
        std::move(ex), std::chrono::duration_cast<asio::steady_timer::duration>(delay));
    auto& t = *timer;
    t.async_wait(timer_wait_handler{std::move(timer), std::move(handler)});
}

// Shared with the cancellation handlers, which may outlive the clock.
struct manual_clock::state {
    struct waiter {
        std::uint64_t id;
        asio::any_io_executor executor;
        wait_handler handler;
    };

    std::mutex mutex;
    time_point now;
    std::uint64_t next_id = 0;
    std::multimap<time_point, waiter> waiters;

    static void complete(waiter w, error_code ec) {
        asio::post(w.executor, asio::append(std::move(w.handler), ec));
    }

    void cancel(std::uint64_t id) {
        std::optional<waiter> found;
        {
            std::lock_guard lock(mutex);
            auto it = std::find_if(waiters.begin(), waiters.end(),
                                   [id](const auto& entry) { return entry.second.id == id; });
            if (it == waiters.end()) return;
            found.emplace(std::move(it->second));
            waiters.erase(it);
        }
        complete(std::move(*found), asio::error::operation_aborted);
    }
};

manual_clock::manual_clock(time_point start) : state_(std::make_shared<state>()) {
    state_->now = start;
}

manual_clock::~manual_clock() {
    // Waits still pending are abandoned with operation_aborted, never silently dropped.
    std::multimap<time_point, state::waiter> left;
    {
        std::lock_guard lock(state_->mutex);
        left.swap(state_->waiters);
    }
    for (auto& [_, w] : left) state::complete(std::move(w), asio::error::operation_aborted);
}

time_point manual_clock::now() const {
    std::lock_guard lock(state_->mutex);
    return state_->now;
}

void manual_clock::advance(duration d) {
    advance_to(now() + d);
}

void manual_clock::advance_to(time_point t) {
    for (;;) {
        std::optional<state::waiter> due;
        {
            std::lock_guard lock(state_->mutex);
            auto first = state_->waiters.begin();
            if (first == state_->waiters.end() || first->first > t) {
                if (t > state_->now) state_->now = t;
                return;
            }
            if (first->first > state_->now) state_->now = first->first;
            due.emplace(std::move(first->second));
            state_->waiters.erase(first);
        }
        state::complete(std::move(*due), error_code{});
    }
}

std::optional<time_point> manual_clock::next_deadline() const {
    std::lock_guard lock(state_->mutex);
    if (state_->waiters.empty()) return std::nullopt;
    return state_->waiters.begin()->first;
}

std::size_t manual_clock::waiting() const {
    std::lock_guard lock(state_->mutex);
    return state_->waiters.size();
}

void manual_clock::do_wait_until(asio::any_io_executor ex, time_point when, wait_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    std::unique_lock lock(state_->mutex);
    if (when <= state_->now) {
        lock.unlock();
        state::complete({0, std::move(ex), std::move(handler)}, error_code{});
        return;
    }
    auto id = state_->next_id++;
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<state>(state_), id](asio::cancellation_type) {
            if (auto s = weak.lock()) s->cancel(id);
        });
    }
    state_->waiters.emplace(when, state::waiter{id, std::move(ex), std::move(handler)});
}

}  // namespace keel
