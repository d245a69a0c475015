#pragma once

// A process engine on a manual clock and the in-memory store, driven by polling the
// io_context until nothing is ready: virtual time passes only when a test advances it.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <keel/framework/clock.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/memory_store.hpp>
#include <optional>

namespace keel::process::test {

struct harness {
    explicit harness(engine_options options = {}) {
        if (options.worker.empty()) options.worker = "w1";
        if (!options.seed) options.seed = 42;
        eng.emplace(io.get_executor(), store, clock, options);
        eng->run();
        settle();
    }
    ~harness() {
        eng.reset();
        settle();
    }

    // Runs every ready handler until there is nothing left to do at this instant.
    void settle() {
        for (int i = 0; i < 1000; ++i) {
            io.restart();
            if (io.poll() == 0) return;
        }
    }
    void advance(duration d) {
        clock.advance(d);
        settle();
    }

    // Runs a coroutine on the engine's io_context to completion (without advancing time).
    template <class T>
    T sync(asio::awaitable<T> task) {
        std::optional<T> out;
        std::exception_ptr error;
        asio::co_spawn(io, std::move(task), [&](std::exception_ptr e, T v) {
            error = e;
            if (!e) out.emplace(std::move(v));
        });
        settle();
        if (error) std::rethrow_exception(error);
        if (!out) throw std::runtime_error("coroutine did not finish");
        return std::move(*out);
    }
    void sync(asio::awaitable<void> task) {
        bool done = false;
        std::exception_ptr error;
        asio::co_spawn(io, std::move(task), [&](std::exception_ptr e) {
            error = e;
            done = true;
        });
        settle();
        if (error) std::rethrow_exception(error);
        if (!done) throw std::runtime_error("coroutine did not finish");
    }

    instance_snapshot snapshot(const std::string& id) { return *store.load_now(id, true); }
    instance_status status(const std::string& id) { return store.load_now(id, false)->status; }

    asio::io_context io;
    manual_clock clock;
    memory_store store;
    std::optional<engine> eng;
};

}  // namespace keel::process::test
