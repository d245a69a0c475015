// How long an emit keeps its caller (a webhook's answer) waiting when it wakes W suspended
// instances, on the Redis store: the time from the emit's call to its answer, p50 and p99,
// for W = 1 and W = 50 (--wide), with the woken instances in memory (hot) or evicted
// (cold: each is read back from Redis when it is adopted). Run it on two builds to compare
// them (docs/benchmarks.md, "An emit's answer").
//
//   keel_emit_bench [--rounds R] [--wide W]

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <keel/framework/log.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/signals/signal.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <string>
#include <vector>

#include "rounds.hpp"

namespace asio = boost::asio;
namespace redis = keel::redis;
using namespace keel::process;
using steady = std::chrono::steady_clock;

namespace {

// One signal every waiting instance subscribes to (it binds no entity).
struct promo_signals : keel::signals::signal_group {
    keel::signals::signal<int> go{this, "/promo/go"};
};

struct promo_deps {
    promo_signals signals;
    template <class T>
    T& get() {
        return signals;
    }
};

durable<int> wait_for_promo(context& ctx, std::string, promo_signals& signals) {
    co_return co_await ctx.wait(signals.go);
}
inline constexpr auto promo_waiter = define<wait_for_promo>("/promo/:n");

// The emit-to-answer times (us) of `rounds` emits, each waking `wide` instances.
std::vector<double> emit_answers(int rounds, int wide, std::size_t max_hot) {
    keel::test::redis_server server;
    asio::io_context io{1};
    keel::system_clock clock;
    auto conn = redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    redis_store store(conn);
    keel::test::run(io, store.open());
    promo_deps deps;
    engine eng(io.get_executor(), store, clock, {.worker = "bench", .max_hot = max_hot});
    eng.add(promo_waiter, deps);
    std::vector<double> micros;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            eng.run();
            int next = 0;
            for (int round = 0; round < rounds; ++round) {
                std::vector<handle<int>> waiting;
                for (int i = 0; i < wide; ++i)
                    waiting.push_back(co_await eng.start(promo_waiter, std::to_string(next++)));
                auto t0 = steady::now();
                auto r = co_await deps.signals.go.emit(round);
                micros.push_back(
                    std::chrono::duration<double, std::micro>(steady::now() - t0).count());
                if (r.reached != static_cast<std::size_t>(wide))
                    throw std::runtime_error("the emit reached " + std::to_string(r.reached));
                for (auto& h : waiting)
                    if (auto done = co_await h.wait(); !done)
                        throw std::runtime_error("instance failed: " + done.error().message);
            }
            eng.stop();
            conn.close();
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    io.run();
    return micros;
}

}  // namespace

int main(int argc, char** argv) {
    keel::log::configure({.min_level = keel::log::level::warn});
    int rounds = 200, wide = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--rounds")
            rounds = std::max(1, std::stoi(argv[i + 1]));
        else if (flag == "--wide")
            wide = std::max(1, std::stoi(argv[i + 1]));
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    std::printf("emit -> answer, us (%d emits each)\n", rounds);
    std::printf("%-6s %-6s %10s %10s\n", "woken", "memory", "p50", "p99");
    for (int w : {1, wide})
        for (std::size_t hot : {std::size_t{10000}, std::size_t{0}}) {
            auto us = emit_answers(rounds, w, hot);
            std::printf("%-6d %-6s %10.0f %10.0f\n", w, hot ? "hot" : "cold",
                        keel::bench::percentile(us, 0.5), keel::bench::percentile(us, 0.99));
        }
}
