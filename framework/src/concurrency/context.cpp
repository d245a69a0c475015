#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/framework/concurrency/context.hpp>
#include <mutex>
#include <random>

#include "../timer_queue.hpp"

namespace keel::concurrency {

namespace {

class context_service : public asio::execution_context::service {
  public:
    static inline asio::execution_context::id id;

    explicit context_service(asio::execution_context& ctx)
        : asio::execution_context::service(ctx), random_(std::random_device{}()) {}

    void shutdown() override {}

    void set_clock(std::shared_ptr<keel::clock> c) {
        std::lock_guard lock(mutex_);
        clock_ = std::move(c);
    }

    keel::clock& clock() {
        std::lock_guard lock(mutex_);
        if (!clock_) clock_ = std::make_shared<system_clock>();
        return *clock_;
    }

    std::mt19937_64& random() { return random_; }

  private:
    std::mutex mutex_;
    std::shared_ptr<keel::clock> clock_;
    std::mt19937_64 random_;
};

context_service& service_of(const asio::any_io_executor& ex) {
    return asio::use_service<context_service>(asio::query(ex, asio::execution::context));
}

}  // namespace

void set_clock(asio::execution_context& context, std::shared_ptr<keel::clock> clock) {
    asio::use_service<context_service>(context).set_clock(std::move(clock));
}

keel::clock& clock_of(const asio::any_io_executor& executor) {
    return service_of(executor).clock();
}

void seed_random(asio::execution_context& context, std::uint64_t seed) {
    asio::use_service<context_service>(context).random().seed(seed);
}

std::uint64_t random_below(const asio::any_io_executor& executor, std::uint64_t bound) {
    return std::uniform_int_distribution<std::uint64_t>(0,
                                                        bound - 1)(service_of(executor).random());
}

namespace {

// Starts a sleep when a coroutine awaits it, on the clock of that coroutine's executor: the
// sleep is the clock's wait itself, with no coroutine frame of its own.
// (Kept small: it lives in the frame of every sleep.)
struct sleep_for_op {
    duration d;

    template <class Handler>
    void operator()(Handler handler) const {
        auto ex = asio::get_associated_executor(handler);
        auto& clock = clock_of(ex);
        keel::detail::clock_wait(clock, ex, clock.now() + d, std::move(handler));
    }
};

struct sleep_until_op {
    time_point when;

    template <class Handler>
    void operator()(Handler handler) const {
        auto ex = asio::get_associated_executor(handler);
        keel::detail::clock_wait(clock_of(ex), ex, when, std::move(handler));
    }
};

}  // namespace

asio::awaitable<void> sleep_for(duration d) {
    return asio::async_initiate<const asio::use_awaitable_t<>&, void(error_code)>(
        sleep_for_op{d}, asio::use_awaitable);
}

asio::awaitable<void> sleep_until(time_point when) {
    return asio::async_initiate<const asio::use_awaitable_t<>&, void(error_code)>(
        sleep_until_op{when}, asio::use_awaitable);
}

}  // namespace keel::concurrency
