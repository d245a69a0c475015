#pragma once

/// @file
/// keel::process::testing::loop: an io_context a test drives by hand. run(task) runs a
/// coroutine to completion at the current instant; settle() runs every ready handler until
/// nothing is left to do. Time does not pass by itself: timers on a keel::manual_clock fire
/// only when the test advances the clock and settles.
///
/// @code
///   keel::process::testing::loop loop;
///   keel::process::memory_store store;
///   auto created = loop.run(store.start(request));
/// @endcode
///
/// A test on a real server (a Redis store) passes `io_pending`, which says whether a reply is
/// still owed (e.g. the connection's outstanding requests): settle() then also waits for
/// the network, a millisecond at a time, before it calls the loop quiet.
/// Not thread-safe; one loop per test.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

namespace keel::process::testing {

/// An io_context a test drives by hand (see the file's description).
class loop {
  public:
    loop() = default;
    loop(const loop&) = delete;
    loop& operator=(const loop&) = delete;

    /// The io_context, to build engines, stores and connections on.
    boost::asio::io_context& io() { return io_; }
    /// The io_context's executor.
    boost::asio::io_context::executor_type executor() { return io_.get_executor(); }

    /// From now on, settle() also waits while `io_pending()` is true.
    void wait_for_io(std::function<bool()> io_pending) { io_pending_ = std::move(io_pending); }

    /// Runs every ready handler until nothing is left to do at this instant.
    void settle() {
        for (int waits = 0;;) {
            io_.restart();
            if (io_.poll() > 0) continue;
            if (!io_pending_ || !io_pending_()) return;
            if (++waits > max_io_waits)
                throw std::runtime_error("keel::process::testing::loop: no reply in 100 s");
            io_.run_one_for(std::chrono::milliseconds(1));
        }
    }

    ///@{
    /// Runs a coroutine to completion at this instant and returns its value (or rethrows).
    /// Throws std::logic_error when it waits for something that does not happen by itself
    /// (a timer the test has not advanced to, a signal not sent).
    /// (The outcome is shared with the completion, which may still run after a throw.)
    template <class T>
    T run(boost::asio::awaitable<T> task) {
        auto value = std::make_shared<std::optional<T>>();  // T need not be default-constructible
        run(keep(std::move(task), value));
        return std::move(**value);
    }
    void run(boost::asio::awaitable<void> task) {
        auto outcome = std::make_shared<std::pair<bool, std::exception_ptr>>();
        boost::asio::co_spawn(io_, std::move(task), [outcome](std::exception_ptr e) {
            *outcome = {true, e};
        });
        settle();
        if (outcome->second) std::rethrow_exception(outcome->second);
        if (!outcome->first) throw std::logic_error(unfinished);
    }
    ///@}

  private:
    template <class T>
    static boost::asio::awaitable<void> keep(boost::asio::awaitable<T> task,
                                             std::shared_ptr<std::optional<T>> value) {
        value->emplace(co_await std::move(task));
    }

    static constexpr int max_io_waits = 100'000;
    static constexpr const char* unfinished =
        "keel::process::testing: the call did not finish (it waits for time to pass or for "
        "an event the test has not caused)";

    boost::asio::io_context io_;
    std::function<bool()> io_pending_;
};

}  // namespace keel::process::testing
