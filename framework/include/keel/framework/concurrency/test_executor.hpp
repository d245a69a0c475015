#pragma once

/// @file
/// The deterministic test scheduler: runs coroutines with a virtual clock and a seeded order.
///
/// @code
///   keel::concurrency::test_scheduler sched(/*seed=*/42);
///   auto value = sched.run(my_test_coroutine());   // runs until it finishes
/// @endcode
///
/// - Everything posted or dispatched to sched.get_executor() goes to a ready queue; each step
///   runs one ready handler chosen by the seeded generator, so the interleaving of tasks is a
///   function of the seed.
/// - Time is a keel::manual_clock installed as the clock of the scheduler's context: the
///   sleeps, timeouts and select timeouts of keel::concurrency wait on it. When nothing is
///   ready, the scheduler jumps the clock to the next deadline (a three-day sleep takes no
///   real time). select() draws from a generator seeded from the same seed.
/// - run() runs until idle: nothing ready and no timer pending. run(awaitable) runs until the
///   coroutine finishes and throws std::runtime_error if everything is blocked first (a
///   deadlock in the code under test). Coroutines still blocked when the scheduler is
///   destroyed are not reclaimed (nothing owns a suspended Asio coroutine but the operation
///   it waits on): a test that provokes a deadlock unblocks it and runs again.
/// - The trace hash covers every scheduling decision, every clock jump and every note(); the
///   same seed gives the same trace.
///
/// What obeys it: handlers on get_executor() (coroutines spawned there, their completions,
/// channel and nursery wake-ups, keel clock waits). Asio I/O objects created with
/// get_executor() register with io_context() and complete through the ready queue; their
/// readiness comes from the kernel (a socket pair is deterministic, a network is not).
/// Asio steady timers are not virtual: use the keel clock.
///
/// Thread-safety: single-threaded. Create, run and destroy it on one thread.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <exception>
#include <keel/framework/clock.hpp>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace keel::concurrency {

class test_scheduler;

/// The scheduler's executor: a standard Asio executor (usable as any_io_executor) that
/// never runs a handler inline.
class test_executor {
  public:
    /// An executor of `s`.
    explicit test_executor(test_scheduler& s) noexcept : scheduler_(&s) {}

    /// The execution context: the scheduler's io_context().
    asio::execution_context& query(asio::execution::context_t) const noexcept;
    /// Never blocking: execute() only queues.
    static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
        return asio::execution::blocking.never;
    }
    /// Itself: it never blocks.
    test_executor require(asio::execution::blocking_t::never_t) const noexcept { return *this; }

    /// Queues `f` on the scheduler's ready queue.
    template <class F>
    void execute(F&& f) const;

    friend bool operator==(const test_executor& a, const test_executor& b) noexcept {
        return a.scheduler_ == b.scheduler_;
    }
    friend bool operator!=(const test_executor& a, const test_executor& b) noexcept {
        return !(a == b);
    }

  private:
    test_scheduler* scheduler_;
};

/// Runs coroutines with a virtual clock in an order fixed by a seed; see the file's description.
class test_scheduler {
  public:
    /// The scheduler's executor type.
    using executor_type = test_executor;

    /// A scheduler whose order derives from `seed`, its clock at `start` (as manual_clock's
    /// default).
    explicit test_scheduler(std::uint64_t seed,
                            time_point start = time_point{std::chrono::hours{24 * 365 * 50}});
    ~test_scheduler();
    test_scheduler(const test_scheduler&) = delete;
    test_scheduler& operator=(const test_scheduler&) = delete;

    /// An executor that queues on this scheduler.
    executor_type get_executor() noexcept { return test_executor(*this); }
    /// The context Asio I/O objects made with get_executor() register with.
    asio::io_context& io_context() noexcept { return io_; }
    /// The virtual clock, installed as the clock of io_context().
    manual_clock& clock() noexcept { return *clock_; }

    /// Runs until idle; returns the number of handlers run.
    std::size_t run();
    /// Runs one handler, or jumps the clock; false when idle.
    bool step();

    /// Spawns `main` and runs until it finishes; returns its value or rethrows its error.
    template <class T>
    T run(asio::awaitable<T> main);

    /// Appends an event to the trace (and to notes()).
    void note(std::string_view event);
    /// The events note() appended, in order.
    const std::vector<std::string>& notes() const noexcept { return notes_; }
    /// A hash of every scheduling decision, clock jump and note: equal for runs with the same seed.
    std::uint64_t trace_hash() const noexcept { return hash_; }
    /// Handlers run so far.
    std::uint64_t steps() const noexcept { return steps_; }

  private:
    friend class test_executor;

    struct item {
        virtual ~item() = default;
        virtual void run() = 0;
    };
    template <class F>
    struct item_of final : item {
        explicit item_of(F&& f) : f_(std::move(f)) {}
        void run() override { f_(); }
        F f_;
    };

    template <class F>
    void enqueue(F&& f) {
        using fn = std::decay_t<F>;
        if (closing_) return;  // destroyed with the scheduler
        ready_.push_back(std::make_unique<item_of<fn>>(fn(std::forward<F>(f))));
    }
    void mix(std::uint64_t value) noexcept;
    bool idle_io();

    std::mt19937_64 random_;
    std::vector<std::unique_ptr<item>> ready_;
    std::vector<std::string> notes_;
    std::uint64_t hash_ = 14695981039346656037ull;
    std::uint64_t steps_ = 0;
    bool closing_ = false;
    std::shared_ptr<manual_clock> clock_;
    asio::io_context io_;  // after the queue: its services post into it while destroyed
};

template <class F>
void test_executor::execute(F&& f) const {
    scheduler_->enqueue(std::forward<F>(f));
}

template <class T>
T test_scheduler::run(asio::awaitable<T> main) {
    // Shared with the coroutine: after a reported deadlock it may still finish later.
    struct outcome {
        bool done = false;
        std::exception_ptr error;
        std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> value;
    };
    auto result = std::make_shared<outcome>();
    auto wrapped = [](asio::awaitable<T> work,
                      std::shared_ptr<outcome> out) -> asio::awaitable<void> {
        if constexpr (std::is_void_v<T>) {
            co_await std::move(work);
            out->value.emplace(true);
        } else {
            out->value.emplace(co_await std::move(work));
        }
    };
    asio::co_spawn(get_executor(), wrapped(std::move(main), result),
                   [result](std::exception_ptr e) {
                       result->error = e;
                       result->done = true;
                   });
    while (!result->done && step()) {
    }
    if (!result->done)
        throw std::runtime_error(
            "test_scheduler: every task is blocked and no timer is pending (deadlock)");
    if (result->error) std::rethrow_exception(result->error);
    if constexpr (!std::is_void_v<T>) return std::move(*result->value);
}

}  // namespace keel::concurrency
