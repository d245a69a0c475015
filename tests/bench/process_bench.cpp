// Durable process engine on the in-memory store, each figure beside a baseline measured in
// the same run:
//   - durable steps/s: a handler doing N ctx.run steps (each executed, committed, resumed)
//     beside N raw memory_store commits of one entry (the store's own cost);
//   - replay cost per journal entry: replaying those N steps after eviction beside decoding
//     the same N values from JSON (the floor any replay pays);
//   - bytes per suspended instance kept in memory: M instances waiting for a signal, all hot,
//     beside the same M evicted (only the store's share).
//
//   keel_process_bench [--steps N] [--instances M]
//
// Prints a markdown table.

#include <malloc.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <keel/framework/clock.hpp>
#include <keel/framework/log.hpp>
#include <keel/process/context.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/memory_store.hpp>
#include <optional>
#include <string>

namespace asio = boost::asio;
using namespace keel::process;
using bench_clock = std::chrono::steady_clock;

namespace {

durable<long> steps(context& ctx, std::string n) {
    long sum = 0;
    long count = std::stol(n);
    for (long i = 0; i < count; ++i) sum += co_await ctx.run("step", [i] { return i; });
    co_await ctx.wait("/continue");
    co_return sum;
}
constexpr auto stepping = define<steps>("/bench/steps/:n");

durable<nlohmann::json> replay_root(context& ctx, long count) {
    long sum = 0;
    for (long i = 0; i < count; ++i) sum += co_await ctx.run("step", [i] { return i; });
    co_return nlohmann::json(sum);
}

// Replays n recorded steps in a bare runtime: the handler-side cost of replay alone.
double replay_only(long n) {
    std::vector<journal_entry> journal;
    journal.reserve(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i)
        journal.push_back(
            journal_entry{static_cast<std::uint64_t>(i), op_kind::run, "step", i, false});
    keel::manual_clock clock;
    detail::runtime rt("bench", clock, std::move(journal), {}, {}, 1);
    context ctx(rt);
    rt.start(replay_root(ctx, n));
    auto t = bench_clock::now();
    rt.run_ready();
    auto elapsed = std::chrono::duration<double>(bench_clock::now() - t).count();
    if (!rt.finished()) std::abort();
    return elapsed;
}

durable<int> idle(context& ctx, std::string) {
    co_return co_await ctx.wait<int>("/go");
}
constexpr auto idling = define<idle>("/bench/idle/:n");

struct world {
    explicit world(std::size_t max_hot) {
        engine_options o;
        o.worker = "bench";
        o.max_hot = max_hot;
        o.seed = 1;
        eng.emplace(io.get_executor(), store, clock, o);
        eng->add(stepping);
        eng->add(idling);
        eng->run();
        settle();
    }
    ~world() {
        eng.reset();
        settle();
    }
    void settle() {
        for (;;) {
            io.restart();
            if (io.poll() == 0) return;
        }
    }
    template <class A>
    void sync(A task) {
        asio::co_spawn(io, std::move(task), [](std::exception_ptr e, auto...) {
            if (e) std::rethrow_exception(e);
        });
        settle();
    }

    asio::io_context io;
    keel::manual_clock clock;
    memory_store store;
    std::optional<engine> eng;
};

double seconds_since(bench_clock::time_point t) {
    return std::chrono::duration<double>(bench_clock::now() - t).count();
}

std::size_t heap_in_use() {
    return mallinfo2().uordblks;
}

}  // namespace

int main(int argc, char** argv) {
    long n = 100'000;
    long m = 10'000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--steps")) n = std::stol(argv[i + 1]);
        if (!std::strcmp(argv[i], "--instances")) m = std::stol(argv[i + 1]);
    }
    keel::log::configure({.min_level = keel::log::level::warn});

    // Durable steps live, then their replay after eviction.
    world w(0);
    auto t = bench_clock::now();
    w.sync(w.eng->start(stepping, std::to_string(n)));
    double live = seconds_since(t);
    std::string id = "bench/steps/" + std::to_string(n);
    if (w.store.load_now(id, false)->status != instance_status::suspended) return 1;
    t = bench_clock::now();
    w.sync(w.eng->deliver(id, "/continue", nullptr));
    double replay = seconds_since(t);
    if (w.store.load_now(id, false)->status != instance_status::completed) return 1;

    double handler_replay = replay_only(n);

    // Baselines: raw store commits; decoding the journal's values.
    memory_store raw;
    auto started =
        raw.start_now(start_request{"raw", "/raw", nullptr, "b", {}, std::chrono::hours(1)});
    t = bench_clock::now();
    for (long i = 0; i < n; ++i) {
        commit_request req;
        req.instance = "raw";
        req.lease = started.lease;
        req.expected_length = static_cast<std::uint64_t>(i);
        req.entries.push_back(
            journal_entry{static_cast<std::uint64_t>(i), op_kind::run, "step", i, false});
        if (!raw.commit_now(req)) return 1;
    }
    double raw_commits = seconds_since(t);
    t = bench_clock::now();
    auto journal = w.store.load_now(id, true)->journal;
    double load = seconds_since(t);
    t = bench_clock::now();
    long sum = 0;
    for (const auto& e : journal) sum += e.value.is_number() ? e.value.get<long>() : 0;
    double decode = seconds_since(t);
    if (sum == 42) std::puts("");

    // Bytes per suspended instance: all hot, beside all evicted.
    auto measure = [&](std::size_t max_hot) {
        malloc_trim(0);
        auto before = heap_in_use();
        std::size_t bytes = 0;
        {
            world x(max_hot);
            for (long i = 0; i < m; ++i) x.sync(x.eng->start(idling, std::to_string(i)));
            bytes = heap_in_use() - before;
            if (x.eng->hot_count() != std::min<std::size_t>(max_hot, static_cast<std::size_t>(m)))
                std::fprintf(stderr, "unexpected hot count %zu\n", x.eng->hot_count());
        }
        return static_cast<double>(bytes) / static_cast<double>(m);
    };
    double cold = measure(0);
    double hot = measure(static_cast<std::size_t>(m));

    std::printf("| figure | Keel | baseline | ratio |\n|---|---|---|---|\n");
    std::printf(
        "| durable steps/s (ctx.run, in-memory store), N=%ld | %.0f | %.0f raw commits/s | %.2f "
        "|\n",
        n, n / live, n / raw_commits, (n / live) / (n / raw_commits));
    std::printf(
        "| replay in the handler, ns per journal entry, N=%ld | %.1f | %.1f (JSON decode only) | "
        "%.1f |\n",
        n, handler_replay / n * 1e9, decode / n * 1e9, handler_replay / decode);
    std::printf(
        "| resume of an evicted instance (load, rebuild, replay, commit), ns per entry | %.0f | "
        "%.1f (copying the journal out of the store) | %.1f |\n",
        replay / n * 1e9, load / n * 1e9, replay / load);
    std::printf(
        "| bytes per suspended instance in memory, M=%ld | %.0f (hot, incl. store) | %.0f "
        "(evicted: store only) | %.2f |\n",
        m, hot, cold, hot / cold);
    std::printf("| bytes the engine adds per hot suspended instance | %.0f | | |\n", hot - cold);
    return 0;
}
