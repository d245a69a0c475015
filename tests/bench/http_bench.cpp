// Keel's HTTP stack against a bare Boost.Beast awaitable server doing the same work, in
// the same process and the same run, each on one server thread, loaded in turn by `wrk`
// on loopback.
//
//   keel_http_bench [--duration S] [--connections N] [--rounds R] [--pin on|off]
//                   [--only keel|bare]
//
// The work: GET /hello/:name answers {"message":"hello, <name>","length":<n>}.
//   keel: router -> default middleware (request id, access log, metrics, error mapping)
//         -> a controller resolved through keel::di in a per-request scope.
//   bare: Beast's awaitable server loop with a prefix check on the target.
// Rounds alternate keel and bare; the table reports the median of the rounds, and the ratio
// is the median of the per-round ratios (robust to load shifts on a shared machine).

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <iostream>
#include <keel/framework/service.hpp>
#include <keel/http/builtin.hpp>
#include <keel/http/controller.hpp>
#include <keel/http/server.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bare_http.hpp"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace http = keel::http;
using tcp = asio::ip::tcp;

namespace {

struct options {
    int duration = 10;
    int connections = 64;
    int rounds = 3;
    std::string only;  // "keel" or "bare": load just one (for profiling)
    bool pin = false;  // servers on CPU 0, wrk on CPU 1
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--only") {
            o.only = argv[i + 1];
            continue;
        }
        if (flag == "--pin") {
            o.pin = std::string(argv[i + 1]) == "on";
            continue;
        }
        int value = std::stoi(argv[i + 1]);
        if (flag == "--duration")
            o.duration = value;
        else if (flag == "--connections")
            o.connections = value;
        else if (flag == "--rounds")
            o.rounds = value;
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    return o;
}

std::string greeting_body(std::string_view name) {
    return nlohmann::json{{"message", "hello, " + std::string(name)}, {"length", name.size()}}
        .dump();
}

// ---- Keel -------------------------------------------------------------------------------

struct greeter {
    std::string greet(std::string_view name) const { return greeting_body(name); }
};

struct hello_controller {
    using inject = keel::di::inject<greeter&>;
    explicit hello_controller(greeter& g) : greeter_(g) {}

    static void routes(http::controller_routes<hello_controller>& r) {
        r.prefix("/hello");
        r.get("/:name", &hello_controller::hello);
    }

    asio::awaitable<http::response> hello(http::request& req) {
        co_return http::response::text(greeter_.greet(req.param("name")), http::status::ok,
                                       "application/json");
    }

  private:
    greeter& greeter_;
};

// ---- bare Beast -------------------------------------------------------------------------

// Answers GET /hello/<name> as the Keel controller does; anything else 404.
void bare_answer(const keel::bench::bare::request& req, keel::bench::bare::response& res) {
    auto target = std::string_view(req.target());
    if (req.method() == bhttp::verb::get && target.starts_with("/hello/")) {
        res.set(bhttp::field::content_type, "application/json");
        res.body() = greeting_body(target.substr(7));
    } else {
        res.result(bhttp::status::not_found);
    }
}

// ---- wrk --------------------------------------------------------------------------------

struct figures {
    double rps = 0;
    double p99_ms = 0;
    double cpu_us = 0;  // server CPU time (user + system) per request
};

// CPU time of this process: while wrk loads one server, the other is idle.
double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return secs(u.ru_utime) + secs(u.ru_stime);
}

double to_ms(const std::string& value, const std::string& unit) {
    double v = std::stod(value);
    if (unit == "us") return v / 1000;
    if (unit == "s") return v * 1000;
    return v;
}

figures run_wrk(const options& o, std::uint16_t port) {
    auto command = std::string(o.pin ? "taskset -c 1 " : "") + "wrk -t1 -c" +
                   std::to_string(o.connections) + " -d" + std::to_string(o.duration) +
                   "s --latency http://127.0.0.1:" + std::to_string(port) + "/hello/world 2>&1";
    std::string out;
    double cpu_before = cpu_seconds();
    if (FILE* pipe = popen(command.c_str(), "r")) {
        char chunk[4096];
        while (auto n = fread(chunk, 1, sizeof chunk, pipe)) out.append(chunk, n);
        pclose(pipe);
    }
    double cpu = cpu_seconds() - cpu_before;
    figures f;
    std::smatch m;
    if (std::regex_search(out, m, std::regex(R"((\d+) requests in)")))
        f.cpu_us = cpu * 1e6 / std::stod(m[1]);
    if (std::regex_search(out, m, std::regex(R"(Requests/sec:\s+([0-9.]+))")))
        f.rps = std::stod(m[1]);
    if (std::regex_search(out, m, std::regex(R"(99%\s+([0-9.]+)(us|ms|s))")))
        f.p99_ms = to_ms(m[1], m[2]);
    if (f.rps == 0) std::cerr << "wrk output not understood:\n" << out << "\n";
    if (std::regex_search(out, m, std::regex(R"(Non-2xx or 3xx responses:\s+(\d+))")))
        std::cerr << "warning: " << m[1] << " non-2xx responses\n";
    return f;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    auto opts = parse(argc, argv);
    if (opts.pin) {
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        CPU_SET(0, &cpus);
        sched_setaffinity(0, sizeof cpus, &cpus);  // inherited by the server threads
    }
    // Access log lines are filtered (level warn): the middleware runs, the terminal does not.
    keel::log::configure({.min_level = keel::log::level::warn});

    // Keel: one service thread.
    keel::service service({.threads = 1, .handle_signals = false});
    keel::di::registry registry;
    registry.singleton<greeter>().per_request<hello_controller>();
    auto container = registry.build();
    http::router router;
    http::metrics metrics;
    http::health health;
    http::install_defaults(router, metrics, health);
    http::mount<hello_controller>(router, container);
    http::server server(
        service, router,
        {.address = "127.0.0.1", .port = 0, .metrics = &metrics, .health = &health});
    server.start();
    std::thread keel_thread([&] { service.run(); });

    // Bare Beast: one io_context thread.
    asio::io_context bare_io(1);
    tcp::acceptor acceptor(bare_io, {asio::ip::make_address("127.0.0.1"), 0});
    asio::co_spawn(bare_io, keel::bench::bare::listen(acceptor, bare_answer), asio::detached);
    std::thread bare_thread([&] { bare_io.run(); });

    std::vector<double> keel_rps, keel_p99, bare_rps, bare_p99, keel_cpu, bare_cpu, round_ratio;
    for (int round = 0; round < opts.rounds; ++round) {
        auto k = opts.only == "bare" ? figures{1, 0} : run_wrk(opts, server.port());
        auto b =
            opts.only == "keel" ? figures{1, 0} : run_wrk(opts, acceptor.local_endpoint().port());
        std::cerr << "round " << round + 1 << ": keel " << k.rps << " req/s p99 " << k.p99_ms
                  << " ms " << k.cpu_us << " us cpu/req; bare " << b.rps << " req/s p99 "
                  << b.p99_ms << " ms " << b.cpu_us << " us cpu/req\n";
        keel_cpu.push_back(k.cpu_us);
        bare_cpu.push_back(b.cpu_us);
        round_ratio.push_back(k.rps / b.rps);
        keel_rps.push_back(k.rps);
        keel_p99.push_back(k.p99_ms);
        bare_rps.push_back(b.rps);
        bare_p99.push_back(b.p99_ms);
    }

    service.stop();
    keel_thread.join();
    asio::post(bare_io, [&] {
        acceptor.close();
        bare_io.stop();
    });
    bare_thread.join();

    double k = median(keel_rps), b = median(bare_rps);
    std::printf(
        "| server | req/s (median of %d) | p99 latency (ms) | server CPU per request (us) |\n"
        "|---|---|---|---|\n",
        opts.rounds);
    std::printf("| bare Beast | %.0f | %.2f | %.1f |\n", b, median(bare_p99), median(bare_cpu));
    std::printf("| Keel (router + DI controller + default middleware) | %.0f | %.2f | %.1f |\n", k,
                median(keel_p99), median(keel_cpu));
    std::printf(
        "\nKeel / bare requests per second: %.1f%% (median of the per-round ratios; each round "
        "loads Keel then bare back to back; ratio of the medians: %.1f%%; target >= 90%%)\n",
        100 * median(round_ratio), 100 * k / b);
    std::printf("Keel server CPU per request: %.0f%% of bare's\n",
                100 * median(keel_cpu) / median(bare_cpu));
    return 0;
}
