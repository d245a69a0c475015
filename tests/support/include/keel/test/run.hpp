#pragma once

// Runs a coroutine to completion on an io_context in a test and returns its value (or
// rethrows its exception). Fails the test instead of hanging when it takes too long.

#include <gtest/gtest.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <future>
#include <optional>
#include <stdexcept>

// ASSERT_TRUE for coroutines returning awaitable<void>: fails the test and co_returns.
#define CO_ASSERT_TRUE(cond)                         \
    if (!(cond)) {                                   \
        ADD_FAILURE() << "assertion failed: " #cond; \
        co_return;                                   \
    }

namespace keel::test {

namespace detail {
template <class T>
boost::asio::awaitable<void> keep(boost::asio::awaitable<T> task, std::optional<T>& value) {
    value.emplace(co_await std::move(task));
}
}  // namespace detail

void run_until(boost::asio::io_context& io, const bool& done, std::chrono::milliseconds limit);

inline void run(boost::asio::io_context& io, boost::asio::awaitable<void> task,
                std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    std::exception_ptr error;
    bool done = false;
    boost::asio::co_spawn(io, std::move(task), [&](std::exception_ptr e) {
        error = e;
        done = true;
    });
    run_until(io, done, limit);
    if (error) std::rethrow_exception(error);
}

template <class T>
T run(boost::asio::io_context& io, boost::asio::awaitable<T> task,
      std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    std::optional<T> value;  // T need not be default-constructible
    run(io, detail::keep(std::move(task), value), limit);
    return std::move(*value);
}

// Runs the coroutine `make()` returns on `where` (an io_context another thread runs, or an
// executor) and waits for its value, or rethrows its exception. `make` is a callable (a
// lambda returning an awaitable), which co_spawn keeps alive while its coroutine runs.
template <class Where, class Make>
auto call_on(Where& where, Make make) -> typename decltype(make())::value_type {
    using T = typename decltype(make())::value_type;
    std::promise<T> p;
    boost::asio::co_spawn(where, std::move(make), [&](std::exception_ptr e, T v) {
        if (e)
            p.set_exception(e);
        else
            p.set_value(std::move(v));
    });
    return p.get_future().get();
}

// Spawns `count` coroutines, make(i) for each i, and runs the io_context until all have
// finished; rethrows the first exception. make(i) returns a callable producing an
// awaitable<void> (a lambda), which co_spawn keeps alive while its coroutine runs.
template <class Make>
void run_concurrently(boost::asio::io_context& io, int count, Make make,
                      std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    int finished = 0;
    bool done = count == 0;
    std::exception_ptr error;
    for (int i = 0; i < count; ++i) {
        boost::asio::co_spawn(io, make(i), [&](std::exception_ptr e) {
            if (e && !error) error = e;
            done = ++finished == count;
        });
    }
    run_until(io, done, limit);
    if (error) std::rethrow_exception(error);
}

}  // namespace keel::test
