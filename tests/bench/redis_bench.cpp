// Pipelined throughput of keel::redis::connection (many coroutines, one connection) beside
// `redis-benchmark -c 1 -P 16` against the same redis-server, in the same run.
//
//   keel_redis_bench [--requests N] [--concurrency C[,C...]] [--transport unix|tcp] [--rounds R]
//
// Prints a markdown table: command, client, requests/s, ratio to redis-benchmark.

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <keel/framework/redis/connection.hpp>
#include <keel/test/redis_server.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = keel::redis;

namespace {

struct options {
    long requests = 1'000'000;
    std::vector<int> concurrency{16, 256, 1000};
    std::string transport = "unix";
    int rounds = 3;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--requests")
            o.requests = std::stol(value);
        else if (flag == "--transport")
            o.transport = value;
        else if (flag == "--rounds")
            o.rounds = std::max(1, std::stoi(value));
        else if (flag == "--concurrency") {
            o.concurrency.clear();
            std::stringstream ss(value);
            for (std::string part; std::getline(ss, part, ',');)
                o.concurrency.push_back(std::stoi(part));
        } else {
            throw std::invalid_argument("unknown flag " + flag);
        }
    }
    return o;
}

asio::awaitable<void> worker(redis::connection& c, const std::string& command, long count,
                             long& failures) {
    // Encoded once, as redis-benchmark does; each request sends the same bytes.
    const auto cmd = command == "SET" ? redis::command("SET", "key:__rand_int__", "xxx")
                                      : redis::command("GET", "key:__rand_int__");
    for (long i = 0; i < count; ++i) {
        auto r = co_await c.execute(cmd);
        if (!r) ++failures;
    }
}

// Requests per second of `concurrency` coroutines sharing one connection.
double keel_rate(const std::string& url, const std::string& command, long requests,
                 int concurrency) {
    asio::io_context io(1);
    auto c =
        redis::connection::create(io.get_executor(), {.url = url, .health_check_interval = {}});
    if (!c) throw std::runtime_error(c.error().what());
    long failures = 0;
    long per_worker = requests / concurrency;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < concurrency; ++i) {
        asio::co_spawn(io, worker(*c, command, per_worker, failures), asio::detached);
    }
    // The workers finish, then the connection is closed so io.run() returns.
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            asio::steady_timer t(io);
            while (c->stats().replies < static_cast<std::uint64_t>(per_worker * concurrency)) {
                t.expires_after(std::chrono::milliseconds(1));
                co_await t.async_wait(asio::use_awaitable);
            }
            c->close();
        },
        asio::detached);
    io.run();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (failures) throw std::runtime_error(std::to_string(failures) + " requests failed");
    return static_cast<double>(per_worker * concurrency) / seconds;
}

// Runs redis-benchmark and returns requests/s for `command` (SET or GET).
double redis_benchmark_rate(const keel::test::redis_server& server, const std::string& transport,
                            const std::string& command, long requests) {
    std::string target = transport == "tcp" ? "-h 127.0.0.1 -p " + std::to_string(server.port())
                                            : "-s '" + server.socket_path() + "'";
    std::string lower = command == "SET" ? "set" : "get";
    std::string cmd = "redis-benchmark " + target + " -c 1 -P 16 -n " + std::to_string(requests) +
                      " -t " + lower + " --csv 2>/dev/null";
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
        char buf[4096];
        while (auto n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
        ::pclose(p);
    }
    // CSV: "test","rps",...  then  "SET","123456.79",...
    auto line = out.find("\"" + command + "\"");
    if (line == std::string::npos)
        throw std::runtime_error("unexpected redis-benchmark output: " + out);
    auto first = out.find('"', out.find(',', line) + 1) + 1;
    return std::stod(out.substr(first, out.find('"', first) - first));
}

}  // namespace

int main(int argc, char** argv) {
    try {
        auto opts = parse(argc, argv);
        keel::test::redis_server server({.tcp = opts.transport == "tcp"});
        auto url = opts.transport == "tcp" ? server.tcp_url() : server.url();
        std::cout << "transport: " << opts.transport << ", requests per run: " << opts.requests
                  << ", median of " << opts.rounds << " alternating rounds\n\n";
        std::cout << "| command | client | requests/s | vs redis-benchmark -c 1 -P 16 |\n";
        std::cout << "|---|---|---:|---:|\n";
        for (std::string command : {"SET", "GET"}) {
            // Warm both up once, then alternate baseline and Keel runs so that drift in
            // machine load hits both alike; report the median of the rounds.
            redis_benchmark_rate(server, opts.transport, command, opts.requests / 10);
            keel_rate(url, command, opts.requests / 10, 64);
            std::vector<double> base;
            std::vector<std::vector<double>> keel(opts.concurrency.size());
            for (int round = 0; round < opts.rounds; ++round) {
                base.push_back(
                    redis_benchmark_rate(server, opts.transport, command, opts.requests));
                for (std::size_t i = 0; i < opts.concurrency.size(); ++i)
                    keel[i].push_back(keel_rate(url, command, opts.requests, opts.concurrency[i]));
            }
            double b = median(base);
            std::printf("| %s | redis-benchmark -c 1 -P 16 | %.0f | 1.00 |\n", command.c_str(), b);
            for (std::size_t i = 0; i < opts.concurrency.size(); ++i) {
                double rate = median(keel[i]);
                std::printf("| %s | keel, %d coroutines, 1 connection | %.0f | %.2f |\n",
                            command.c_str(), opts.concurrency[i], rate, rate / b);
            }
            std::fflush(stdout);
        }
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "keel_redis_bench: " << e.what() << "\n";
        return 1;
    }
}
