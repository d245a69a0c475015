#include <algorithm>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/framework/clock.hpp>
#include <map>
#include <mutex>
#include <vector>

#include "timer_queue.hpp"

namespace keel {

namespace {

// Starts a wait on a clock when a coroutine awaits it: no coroutine frame of its own.
struct clock_sleep {
    clock* c;
    time_point when;

    template <class Handler>
    void operator()(Handler handler) const {
        auto ex = asio::get_associated_executor(handler);
        detail::clock_wait(*c, ex, when, std::move(handler));
    }
};

}  // namespace

asio::awaitable<void> clock::sleep_until(time_point when) {
    return asio::async_initiate<const asio::use_awaitable_t<>&, wait_signature>(
        clock_sleep{this, when}, asio::use_awaitable);
}

asio::awaitable<void> clock::sleep_for(duration d) {
    return sleep_until(now() + d);
}

time_point system_clock::now() const {
    return std::chrono::system_clock::now();
}

void system_clock::do_wait_until(asio::any_io_executor ex, time_point when, wait_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto& queue = detail::timer_queue::of(ex);
    auto* w = queue.make<detail::erased_wait>(when, ex, std::move(handler));
    queue.add(w, slot, ex);
}

namespace detail {

timer_queue::timer_queue(asio::execution_context& context)
    : asio::execution_context::service(context) {}

timer_queue::~timer_queue() {
    for (void* slab : slabs_) ::operator delete(slab);
}

void* timer_queue::allocate(std::size_t size) {
    auto c = (size + block_step - 1) / block_step - 1;
    if (c >= block_classes) return ::operator new(size);
    std::lock_guard lock(mutex_);
    if (auto* b = free_[c]) {
        free_[c] = b->next;
        return b;
    }
    const std::size_t block_size = (c + 1) * block_step;
    if (static_cast<std::size_t>(end_[c] - next_[c]) < block_size) {
        slabs_.reserve(slabs_.size() + 1);
        next_[c] = static_cast<std::byte*>(::operator new(slab_size));
        slabs_.push_back(next_[c]);
        end_[c] = next_[c] + slab_size / block_size * block_size;
    }
    void* p = next_[c];
    next_[c] += block_size;
    return p;
}

void timer_queue::deallocate(void* p, std::size_t size) noexcept {
    auto c = (size + block_step - 1) / block_step - 1;
    if (c >= block_classes) {
        ::operator delete(p);
        return;
    }
    std::lock_guard lock(mutex_);
    free_[c] = new (p) block{free_[c]};
}

void timer_queue::shutdown() {
    std::vector<timer_wait*> left;
    std::optional<asio::steady_timer> timer;
    {
        std::lock_guard lock(mutex_);
        shut_down_ = true;
        while (!waits_.empty()) {
            left.push_back(&*waits_.begin());
            waits_.erase(waits_.begin());
        }
        timer.swap(timer_);
        armed_for_.reset();
    }
    // As Asio does with the operations of a context that shuts down: destroyed, not called.
    for (auto* w : left) w->destroy(*this);
}

std::size_t timer_queue::size() const {
    std::lock_guard lock(mutex_);
    return waits_.size();
}

void timer_queue::add(timer_wait* w, asio::cancellation_slot slot,
                      const asio::any_io_executor& ex) {
    std::unique_lock lock(mutex_);
    if (shut_down_) {
        lock.unlock();
        w->destroy(*this);
        return;
    }
    if (w->when() <= std::chrono::system_clock::now()) {
        lock.unlock();
        w->complete(error_code{}, *this);
        return;
    }
    if (slot.is_connected()) w->canceller_ = &slot.template emplace<cancel_handler>(this, w->when_);
    waits_.insert(*w);
    if (!timer_) {
        // The timer runs on the io_context itself when there is one, not on a strand of it.
        if (auto* io = ex.target<asio::io_context::executor_type>())
            timer_.emplace(asio::io_context::executor_type(*io));
        else
            timer_.emplace(ex);
    }
    arm();
}

void timer_queue::arm() {
    if (waits_.empty()) {
        if (armed_for_) {
            armed_for_.reset();
            timer_->cancel();
        }
        return;
    }
    auto first = waits_.begin()->when();
    if (armed_for_ && *armed_for_ <= first) return;
    armed_for_ = first;
    timer_->expires_after(std::chrono::duration_cast<asio::steady_timer::duration>(
        first - std::chrono::system_clock::now()));
    timer_->async_wait([this](error_code ec) { on_timer(ec); });
}

void timer_queue::on_timer(error_code ec) {
    if (ec == asio::error::operation_aborted) return;
    std::vector<timer_wait*> due;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return;
        armed_for_.reset();
        auto now = std::chrono::system_clock::now();
        while (!waits_.empty() && waits_.begin()->when() <= now) {
            due.push_back(&*waits_.begin());
            waits_.erase(waits_.begin());
        }
        arm();
    }
    for (auto* w : due) w->complete(error_code{}, *this);
}

void timer_queue::cancel(time_point when, const void* canceller) {
    timer_wait* w = nullptr;
    {
        std::lock_guard lock(mutex_);
        auto [it, end] = waits_.equal_range(when);
        while (it != end && it->canceller_ != canceller) ++it;
        if (it == end) return;
        w = &*it;
        waits_.erase(it);
        if (waits_.empty()) arm();
    }
    w->complete(asio::error::operation_aborted, *this);
}

}  // namespace detail

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
