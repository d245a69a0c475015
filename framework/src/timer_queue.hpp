#pragma once

// The system clock's waits: one ordered queue per execution context, served by a single
// steady timer armed for the earliest wait (the design manual_clock uses for virtual time).
// A wait costs one node in the queue instead of a steady_timer and its wait operation.
//
// Private to keel::framework (clock.cpp and the concurrency sleeps).
//
// Thread-safety: the queue is guarded by a mutex; waits may be added and cancelled from any
// thread. Completions are posted to the waiting handler's executor, never run inline.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/intrusive/set.hpp>
#include <cstdint>
#include <keel/framework/clock.hpp>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace keel::detail {

class timer_queue;

// One wait in a queue. The queue owns it, and its memory (from the queue's blocks), until it
// completes it.
class timer_wait : public boost::intrusive::set_base_hook<
                       boost::intrusive::optimize_size<true>,
                       boost::intrusive::link_mode<boost::intrusive::normal_link>> {
  public:
    explicit timer_wait(time_point when) noexcept : when_(when) {}
    timer_wait(const timer_wait&) = delete;
    timer_wait& operator=(const timer_wait&) = delete;
    virtual ~timer_wait() = default;

    // Posts the handler with `ec` and frees this wait.
    virtual void complete(error_code ec, timer_queue& queue) = 0;
    // Frees this wait without calling its handler.
    virtual void destroy(timer_queue& queue) noexcept = 0;

    time_point when() const noexcept { return when_; }

  private:
    friend class timer_queue;
    time_point when_;
    const void* canceller_ = nullptr;  // the handler left in the waiter's cancellation slot
};

// A wait holding its completion handler by its own type (no type erasure, one allocation).
template <class Handler>
class handler_wait final : public timer_wait {
  public:
    handler_wait(time_point when, Handler handler)
        : timer_wait(when), handler_(std::move(handler)) {}

    void complete(error_code ec, timer_queue& queue) override;
    void destroy(timer_queue& queue) noexcept override;

  private:
    Handler handler_;
};

// A wait with a type-erased handler and an explicit executor (keel::clock's interface).
class erased_wait final : public timer_wait {
  public:
    erased_wait(time_point when, asio::any_io_executor ex, clock::wait_handler handler)
        : timer_wait(when), executor_(std::move(ex)), handler_(std::move(handler)) {}

    void complete(error_code ec, timer_queue& queue) override;
    void destroy(timer_queue& queue) noexcept override;

  private:
    asio::any_io_executor executor_;
    clock::wait_handler handler_;
};

class timer_queue final : public asio::execution_context::service {
  public:
    static inline asio::execution_context::id id;

    explicit timer_queue(asio::execution_context& context);
    ~timer_queue() override;

    static timer_queue& of(const asio::any_io_executor& ex) {
        return asio::use_service<timer_queue>(asio::query(ex, asio::execution::context));
    }

    // Takes ownership of `w`, which completes when the system clock reaches its due time
    // (posted at once if it already has), or with operation_aborted when `slot` is
    // triggered. `ex` is an executor of this queue's context.
    void add(timer_wait* w, asio::cancellation_slot slot, const asio::any_io_executor& ex);

    // Queued waits (for tests and benchmarks).
    std::size_t size() const;

    // Memory for waits: blocks carved from slabs that the queue owns, without a malloc
    // header each, reused through a free list per size.
    void* allocate(std::size_t size);
    void deallocate(void* p, std::size_t size) noexcept;

    template <class Wait, class... Args>
    Wait* make(Args&&... args) {
        void* p = allocate(sizeof(Wait));
        try {
            return new (p) Wait(std::forward<Args>(args)...);
        } catch (...) {
            deallocate(p, sizeof(Wait));
            throw;
        }
    }
    template <class Wait>
    void free(Wait* w) noexcept {
        w->~Wait();
        deallocate(w, sizeof(Wait));
    }

  private:
    // Waits due at the same time stay in the order they were added.
    struct key_of {
        using type = time_point;
        type operator()(const timer_wait& w) const noexcept { return w.when_; }
    };
    using set_type = boost::intrusive::multiset<timer_wait, boost::intrusive::key_of_value<key_of>,
                                                boost::intrusive::constant_time_size<true>>;

    // What a wait leaves in its handler's cancellation slot: the due time and its own
    // address, which identifies the wait (one handler per slot), never a pointer to the wait,
    // which may be gone by the time the slot is triggered.
    struct cancel_handler {
        timer_queue* queue;
        time_point when;
        void operator()(asio::cancellation_type) const { queue->cancel(when, this); }
    };

    void shutdown() override;
    void cancel(time_point when, const void* canceller);
    // With the mutex held.
    void arm();
    void on_timer(error_code ec);

    struct block {
        block* next;
    };
    static constexpr std::size_t block_step = 8;
    static constexpr std::size_t block_classes = 32;  // up to 256 bytes
    static constexpr std::size_t slab_size = 16384;

    mutable std::mutex mutex_;
    block* free_[block_classes] = {};
    std::byte* next_[block_classes] = {};
    std::byte* end_[block_classes] = {};
    std::vector<void*> slabs_;
    set_type waits_;
    std::optional<asio::steady_timer> timer_;
    std::optional<time_point> armed_for_;
    bool shut_down_ = false;
};

// Adds a wait for `when` that completes `handler` (through the per-context queue of `ex`).
template <class Handler>
void system_wait(const asio::any_io_executor& ex, time_point when, Handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto& queue = timer_queue::of(ex);
    auto* w = queue.make<handler_wait<Handler>>(when, std::move(handler));
    queue.add(w, slot, ex);
}

template <class Handler>
void handler_wait<Handler>::complete(error_code ec, timer_queue& queue) {
    Handler handler(std::move(handler_));
    queue.free(this);
    auto ex = asio::get_associated_executor(handler);
    asio::post(ex, asio::append(std::move(handler), ec));
}

template <class Handler>
void handler_wait<Handler>::destroy(timer_queue& queue) noexcept {
    queue.free(this);
}

inline void erased_wait::complete(error_code ec, timer_queue& queue) {
    clock::wait_handler handler;
    handler.swap(handler_);  // Asio 1.81's move assignment recurses
    auto ex = std::move(executor_);
    queue.free(this);
    asio::post(ex, asio::append(std::move(handler), ec));
}

inline void erased_wait::destroy(timer_queue& queue) noexcept {
    queue.free(this);
}

}  // namespace keel::detail

namespace keel::detail {

// Waits on `c` until `when`: through the queue for the system clock, without erasing the
// handler; through the clock's interface for any other clock.
template <class Handler>
void clock_wait(clock& c, const asio::any_io_executor& ex, time_point when, Handler handler) {
    if (dynamic_cast<system_clock*>(&c))
        system_wait(ex, when, std::move(handler));
    else
        c.async_wait_until(ex, when, std::move(handler));
}

}  // namespace keel::detail
