// Micro-benchmarks of keel::concurrency, each beside the same thing written directly with
// Asio, in the same binary and run. Single-threaded io_context, as Keel runs them.
//
//   keel_concurrency_bench --benchmark_filter=... --benchmark_repetitions=5
//
// The `sleepers` benchmarks report the resident memory of 100,000 sleeping tasks; run each
// alone (--benchmark_filter=sleepers_100k_keel) so no other benchmark's heap is counted.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <keel/framework/concurrency.hpp>
#include <memory>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace kc = keel::concurrency;
using asio::awaitable;
using asio::use_awaitable;
using namespace std::chrono_literals;

// Runs `body(state)` as a coroutine on a fresh io_context until it finishes.
template <class F>
void run_coroutine(benchmark::State& state, F body) {
    asio::io_context io(1);
    asio::co_spawn(io, body(state), [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
    });
    io.run();
}

awaitable<void> nothing() {
    co_return;
}

awaitable<void> yield_once() {
    co_await asio::post(co_await asio::this_coro::executor, use_awaitable);
}

// --- spawn + join -----------------------------------------------------------------------

awaitable<void> keel_spawn_join(benchmark::State& state) {
    co_await kc::open_nursery([&](kc::nursery& n) -> awaitable<void> {
        for (auto _ : state) {
            auto h = n.spawn(nothing());
            co_await h.join();
        }
    });
}

awaitable<void> asio_spawn_join(benchmark::State& state) {
    auto ex = co_await asio::this_coro::executor;
    for (auto _ : state) co_await asio::co_spawn(ex, nothing(), use_awaitable);
}

void spawn_join_keel(benchmark::State& state) {
    run_coroutine(state, keel_spawn_join);
}
void spawn_join_asio(benchmark::State& state) {
    run_coroutine(state, asio_spawn_join);
}
BENCHMARK(spawn_join_keel);
BENCHMARK(spawn_join_asio);

// --- channel ping-pong (one round trip per iteration) -----------------------------------

awaitable<void> keel_ponger(kc::channel<int> ping, kc::channel<int> pong) {
    while (auto v = co_await ping.recv()) co_await pong.send(*v + 1);
}

awaitable<void> keel_ping_pong(benchmark::State& state) {
    kc::channel<int> ping, pong;
    co_await kc::open_nursery([&](kc::nursery& n) -> awaitable<void> {
        n.spawn(keel_ponger(ping, pong));
        int v = 0;
        for (auto _ : state) {
            co_await ping.send(v);
            v = *co_await pong.recv();
        }
        ping.close();
    });
}

using asio_channel = asio::experimental::channel<void(boost::system::error_code, int)>;

awaitable<void> asio_ponger(asio_channel& ping, asio_channel& pong) {
    for (;;) {
        auto [ec, v] = co_await ping.async_receive(asio::as_tuple(use_awaitable));
        if (ec) co_return;
        co_await pong.async_send({}, v + 1, use_awaitable);
    }
}

awaitable<void> asio_ping_pong(benchmark::State& state) {
    auto ex = co_await asio::this_coro::executor;
    asio_channel ping(ex, 0), pong(ex, 0);
    asio::co_spawn(ex, asio_ponger(ping, pong), asio::detached);
    int v = 0;
    for (auto _ : state) {
        co_await ping.async_send({}, v, use_awaitable);
        v = co_await pong.async_receive(use_awaitable);
    }
    ping.close();
}

void channel_ping_pong_keel(benchmark::State& state) {
    run_coroutine(state, keel_ping_pong);
}
void channel_ping_pong_asio(benchmark::State& state) {
    run_coroutine(state, asio_ping_pong);
}
BENCHMARK(channel_ping_pong_keel);
BENCHMARK(channel_ping_pong_asio);

// --- race of two timers (one expired, one an hour away) ---------------------------------

awaitable<void> keel_race_timers(benchmark::State& state) {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer fast(ex), slow(ex);
    for (auto _ : state) {
        fast.expires_after(0s);
        slow.expires_after(1h);
        auto r = co_await kc::race(fast.async_wait(use_awaitable), slow.async_wait(use_awaitable));
        benchmark::DoNotOptimize(r);
    }
}

awaitable<void> asio_race_timers(benchmark::State& state) {
    using namespace asio::experimental::awaitable_operators;
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer fast(ex), slow(ex);
    for (auto _ : state) {
        fast.expires_after(0s);
        slow.expires_after(1h);
        auto r = co_await (fast.async_wait(use_awaitable) || slow.async_wait(use_awaitable));
        benchmark::DoNotOptimize(r);
    }
}

// The same race on keel::clock sleeps (each sleep owns its timer).
awaitable<void> keel_race_sleeps(benchmark::State& state) {
    for (auto _ : state) {
        auto r = co_await kc::race(kc::sleep_for(0s), kc::sleep_for(1h));
        benchmark::DoNotOptimize(r);
    }
}

void race_two_timers_keel(benchmark::State& state) {
    run_coroutine(state, keel_race_timers);
}
void race_two_timers_asio(benchmark::State& state) {
    run_coroutine(state, asio_race_timers);
}
void race_two_clock_sleeps_keel(benchmark::State& state) {
    run_coroutine(state, keel_race_sleeps);
}
BENCHMARK(race_two_timers_keel);
BENCHMARK(race_two_timers_asio);
BENCHMARK(race_two_clock_sleeps_keel);

// --- a nursery of 10,000 children, each yielding once -----------------------------------

constexpr int children = 10'000;

awaitable<void> keel_nursery_round() {
    co_await kc::open_nursery(
        [](kc::nursery& n) -> awaitable<void> {
            for (int i = 0; i < children; ++i) n.spawn(yield_once());
            co_return;
        },
        {.max_children = children});
}

// Raw Asio: co_spawn each child with a completion that counts down; the parent waits on a
// timer used as an event.
awaitable<void> asio_countdown_round() {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
    int remaining = children;
    for (int i = 0; i < children; ++i) {
        asio::co_spawn(ex, yield_once(), [&](std::exception_ptr) {
            if (--remaining == 0) all_done.cancel();
        });
    }
    auto [ec] = co_await all_done.async_wait(asio::as_tuple(use_awaitable));
    benchmark::DoNotOptimize(ec);
}

// Raw Asio with what a nursery needs to cancel its children: one cancellation signal each.
awaitable<void> asio_cancellable_round() {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
    std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
    int remaining = children;
    for (int i = 0; i < children; ++i) {
        signals.push_back(std::make_unique<asio::cancellation_signal>());
        asio::co_spawn(
            ex, yield_once(),
            asio::bind_cancellation_slot(signals.back()->slot(), [&](std::exception_ptr) {
                if (--remaining == 0) all_done.cancel();
            }));
    }
    auto [ec] = co_await all_done.async_wait(asio::as_tuple(use_awaitable));
    benchmark::DoNotOptimize(ec);
}

template <awaitable<void> (*Round)()>
awaitable<void> rounds(benchmark::State& state) {
    for (auto _ : state) co_await Round();
}

void nursery_10k_children_keel(benchmark::State& state) {
    run_coroutine(state, rounds<keel_nursery_round>);
}
void nursery_10k_children_asio(benchmark::State& state) {
    run_coroutine(state, rounds<asio_countdown_round>);
}
void nursery_10k_children_asio_cancellable(benchmark::State& state) {
    run_coroutine(state, rounds<asio_cancellable_round>);
}
BENCHMARK(nursery_10k_children_keel)->Unit(benchmark::kMicrosecond);
BENCHMARK(nursery_10k_children_asio)->Unit(benchmark::kMicrosecond);
BENCHMARK(nursery_10k_children_asio_cancellable)->Unit(benchmark::kMicrosecond);

// The Keel nursery and the bare countdown in alternation, each iteration one round of each
// (in turn first), timed apart: a round allocates tens of thousands of blocks, so a phase of
// a shared machine, or the heap an earlier benchmark left, moves whole runs of one side.
// Reports the median of the per-iteration ratios (keel / asio) and its quartiles.
awaitable<void> paired_nursery_10k(benchmark::State& state) {
    using clock = std::chrono::steady_clock;
    std::vector<double> ratios, keel_us, asio_us;
    bool keel_first = true;
    for (auto _ : state) {
        auto time = [](auto round) -> awaitable<double> {
            auto start = clock::now();
            co_await round();
            co_return std::chrono::duration<double, std::micro>(clock::now() - start).count();
        };
        double k = 0, a = 0;
        if (keel_first) {
            k = co_await time(keel_nursery_round);
            a = co_await time(asio_countdown_round);
        } else {
            a = co_await time(asio_countdown_round);
            k = co_await time(keel_nursery_round);
        }
        keel_first = !keel_first;
        ratios.push_back(k / a);
        keel_us.push_back(k);
        asio_us.push_back(a);
    }
    auto quantile = [](std::vector<double> v, double q) {
        std::sort(v.begin(), v.end());
        return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
    };
    state.counters["ratio_median"] = quantile(ratios, 0.5);
    state.counters["ratio_q1"] = quantile(ratios, 0.25);
    state.counters["ratio_q3"] = quantile(ratios, 0.75);
    state.counters["keel_us"] = quantile(keel_us, 0.5);
    state.counters["asio_us"] = quantile(asio_us, 0.5);
}

void nursery_10k_paired(benchmark::State& state) {
    run_coroutine(state, paired_nursery_10k);
}
BENCHMARK(nursery_10k_paired)->Unit(benchmark::kMillisecond)->Iterations(40);

// --- 100,000 sleeping tasks: resident memory ---------------------------------------------

double resident_mb() {
    long pages = 0, resident = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1e6;
}

constexpr int sleepers = 100'000;

awaitable<void> keel_sleepers(benchmark::State& state) {
    for (auto _ : state) {
        double before = resident_mb();
        co_await kc::open_nursery(
            [&](kc::nursery& n) -> awaitable<void> {
                for (int i = 0; i < sleepers; ++i) n.spawn(kc::sleep_for(1h));
                co_await yield_once();  // every child is now asleep
                state.counters["rss_mb"] = resident_mb();
                state.counters["rss_delta_mb"] = resident_mb() - before;
                state.counters["bytes_per_task"] = (resident_mb() - before) * 1e6 / sleepers;
                n.cancel();
            },
            {.max_children = sleepers});
    }
}

awaitable<void> asio_sleeper() {
    asio::steady_timer t(co_await asio::this_coro::executor, 1h);
    co_await (t.async_wait(use_awaitable));
}

// Raw Asio: 100,000 co_spawned coroutines each waiting on its own steady_timer.
awaitable<void> asio_sleepers(benchmark::State& state) {
    auto ex = co_await asio::this_coro::executor;
    for (auto _ : state) {
        double before = resident_mb();
        asio::cancellation_signal stop;
        int remaining = sleepers;
        asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
        std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
        signals.reserve(sleepers);
        for (int i = 0; i < sleepers; ++i) {
            signals.push_back(std::make_unique<asio::cancellation_signal>());
            asio::co_spawn(
                ex, asio_sleeper(),
                asio::bind_cancellation_slot(signals.back()->slot(), [&](std::exception_ptr) {
                    if (--remaining == 0) all_done.cancel();
                }));
        }
        co_await yield_once();
        state.counters["rss_mb"] = resident_mb();
        state.counters["rss_delta_mb"] = resident_mb() - before;
        state.counters["bytes_per_task"] = (resident_mb() - before) * 1e6 / sleepers;
        for (auto& s : signals) s->emit(asio::cancellation_type::terminal);
        auto [ec] = co_await all_done.async_wait(asio::as_tuple(use_awaitable));
        benchmark::DoNotOptimize(ec);
    }
}

void sleepers_100k_keel(benchmark::State& state) {
    run_coroutine(state, keel_sleepers);
}
void sleepers_100k_asio(benchmark::State& state) {
    run_coroutine(state, asio_sleepers);
}
BENCHMARK(sleepers_100k_keel)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(sleepers_100k_asio)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
