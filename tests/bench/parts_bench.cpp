// Every core for durable processes: an engine of one part on one thread beside an engine of
// two parts on two threads (as a service with --threads 1 and 2 runs it), in one run, on the
// in-memory store, so that only the engine's own work is measured (no HTTP, no Redis).
//
// A flow is the order flow's shape: start an instance, which runs a step and waits for a
// signal; emit the signal; the instance runs a second step and completes; wait for its
// result. `--clients` coroutines run flows back to back, spread over the threads as HTTP
// connections are, so a start or an emit often comes from the thread of the other part.
// Reports flows/s and the process's CPU per flow for each, and the two-thread / one-thread
// ratios, per round and as medians; rounds alternate which goes first. `--work-us` gives
// each of the two steps that much CPU work (a handler's own computation; 0: none, so the
// figures are the engine's alone).
//
//   keel_parts_bench [--flows N] [--clients C] [--rounds R] [--work-us U]

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <keel/framework/clock.hpp>
#include <keel/framework/log.hpp>
#include <keel/process/context.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/memory_store.hpp>
#include <latch>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace keel::process;

namespace {

struct account {
    static constexpr std::string_view model_name = "account";
};

struct billing : keel::signal_group {
    keel::signal<int, account> paid{this, "/account/:account/paid"};
};

struct dependencies {
    billing signals;
    template <class T>
    T& get() {
        return signals;
    }
};

long work_us = 0;

// Busy for work_us of this thread's CPU time.
int work() {
    if (work_us == 0) return 0;
    timespec start{}, now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    volatile unsigned spin = 0;
    do {
        for (int i = 0; i < 200; ++i) spin = spin + 1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    } while ((now.tv_sec - start.tv_sec) * 1'000'000 + (now.tv_nsec - start.tv_nsec) / 1000 <
             work_us);
    return 0;
}

durable<int> settle(context& ctx, keel::ref<account>, billing& signals) {
    co_await ctx.run("open", [] { return work(); });
    int cents = co_await ctx.wait(signals.paid);
    co_return co_await ctx.run("book", [cents] { return cents + work(); });
}
constexpr auto settling = define<settle>("/account/:account/settle");

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto seconds = [](timeval t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
    return seconds(u.ru_utime) + seconds(u.ru_stime);
}

struct figures {
    double flows_per_s = 0;
    double cpu_us_per_flow = 0;
};

asio::awaitable<void> client(engine& eng, dependencies& deps, std::atomic<long>& next, long flows,
                             std::string round, std::latch& done) {
    for (long n; (n = next.fetch_add(1)) < flows;) {
        keel::ref<account> who(round + "-" + std::to_string(n));
        auto h = co_await eng.start(settling, who);
        co_await deps.signals.paid.emit(who, 1);
        auto r = co_await h.wait();
        if (!r) std::fprintf(stderr, "flow %ld: %s\n", n, r.error().message.c_str());
    }
    done.count_down();
}

figures run(std::size_t threads, long flows, int clients, const std::string& round) {
    std::vector<std::unique_ptr<asio::io_context>> io;
    std::vector<asio::any_io_executor> executors;
    for (std::size_t i = 0; i < threads; ++i) {
        io.push_back(std::make_unique<asio::io_context>(1));
        executors.push_back(io.back()->get_executor());
    }
    memory_store store;
    keel::system_clock clock;
    dependencies deps;
    engine_options options;
    options.worker = "bench";
    options.seed = 1;
    options.max_hot = 100'000;
    engine eng(executors, store, clock, options);
    eng.add(settling, deps);
    eng.run();

    std::atomic<long> next{0};
    std::latch done(clients);
    for (int c = 0; c < clients; ++c)
        asio::co_spawn(*io[static_cast<std::size_t>(c) % threads],
                       client(eng, deps, next, flows, round, done), asio::detached);
    auto cpu = cpu_seconds();
    auto began = std::chrono::steady_clock::now();
    std::vector<std::thread> running;
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
    for (auto& ctx : io) {
        guards.emplace_back(ctx->get_executor());
        running.emplace_back([&ctx] { ctx->run(); });
    }
    done.wait();
    auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    cpu = cpu_seconds() - cpu;
    eng.stop();  // posted to the parts
    guards.clear();
    for (auto& ctx : io) ctx->stop();
    for (auto& t : running) t.join();
    return {double(flows) / wall, cpu * 1e6 / double(flows)};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    long flows = 20'000;
    int clients = 32;
    int rounds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--flows")) flows = std::stol(argv[i + 1]);
        if (!std::strcmp(argv[i], "--clients")) clients = std::stoi(argv[i + 1]);
        if (!std::strcmp(argv[i], "--rounds")) rounds = std::stoi(argv[i + 1]);
        if (!std::strcmp(argv[i], "--work-us")) work_us = std::stol(argv[i + 1]);
    }
    keel::log::configure({.min_level = keel::log::level::warn});
    std::vector<double> one_rate, two_rate, one_cpu, two_cpu, rate_ratio, cpu_ratio;
    for (int r = 0; r < rounds; ++r) {
        figures one, two;
        auto tag = "r" + std::to_string(r);
        if (r % 2 == 0) {
            one = run(1, flows, clients, tag + "a");
            two = run(2, flows, clients, tag + "b");
        } else {
            two = run(2, flows, clients, tag + "b");
            one = run(1, flows, clients, tag + "a");
        }
        std::printf(
            "round %d: 1 thread %.0f flows/s %.1f us CPU/flow; 2 threads %.0f flows/s %.1f us "
            "CPU/flow\n",
            r + 1, one.flows_per_s, one.cpu_us_per_flow, two.flows_per_s, two.cpu_us_per_flow);
        one_rate.push_back(one.flows_per_s);
        two_rate.push_back(two.flows_per_s);
        one_cpu.push_back(one.cpu_us_per_flow);
        two_cpu.push_back(two.cpu_us_per_flow);
        rate_ratio.push_back(two.flows_per_s / one.flows_per_s);
        cpu_ratio.push_back(two.cpu_us_per_flow / one.cpu_us_per_flow);
    }
    std::printf(
        "\n%ld flows, %d clients, %ld us of work per step, medians of %d rounds (ratio: "
        "median of the per-round ratios)\n",
        flows, clients, work_us, rounds);
    std::printf("| engine | flows/s | CPU us per flow |\n|---|---:|---:|\n");
    std::printf("| 1 part, 1 thread | %.0f | %.1f |\n", median(one_rate), median(one_cpu));
    std::printf("| 2 parts, 2 threads | %.0f | %.1f |\n", median(two_rate), median(two_cpu));
    std::printf("| 2 / 1 | **%.2f** | %.2f |\n", median(rate_ratio), median(cpu_ratio));
}
