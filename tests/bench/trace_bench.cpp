// What tracing costs a Keel server: the same route on three servers of one service, loaded
// in turn by `wrk` on loopback, in the same run:
//   off   no span sink (the default without --otlp-endpoint);
//   on    server spans exported as OTLP/JSON to a collector that answers (a child process
//         here, so that its CPU is not counted);
//   on, protobuf   the same as OTLP/protobuf;
//   down  server spans exported to a collector that is down (connections refused).
//
//   keel_trace_bench [--duration S] [--connections N] [--rounds R] [--sample-percent P]
//
// --sample-percent records P% of the traces the requests start (trace::set_root_sampling,
// --otlp-sample-ratio in a service); 100 by default.
//
// The work is keel_http_bench's: GET /hello/:name through the router, the default
// middleware and a controller resolved through keel::di. The service has one thread, and the
// exporter sends from it, so "CPU per request" includes building, queueing, encoding and
// sending the spans. Each round loads the three in a rotated order and waits for the
// exporter's queue to empty between loads; the table reports medians, and the ratios are the
// medians of the per-round ratios against `off`.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <keel/framework/service.hpp>
#include <keel/http/builtin.hpp>
#include <keel/http/controller.hpp>
#include <keel/http/otlp.hpp>
#include <keel/http/server.hpp>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bare_http.hpp"

namespace asio = boost::asio;
namespace http = keel::http;
using tcp = asio::ip::tcp;

namespace {

struct options {
    int duration = 10;
    int connections = 64;
    int rounds = 3;
    int sample_percent = 100;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        int value = std::stoi(argv[i + 1]);
        if (flag == "--duration")
            o.duration = value;
        else if (flag == "--connections")
            o.connections = value;
        else if (flag == "--rounds")
            o.rounds = value;
        else if (flag == "--sample-percent")
            o.sample_percent = value;
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    return o;
}

struct hello_controller {
    static void routes(http::controller_routes<hello_controller>& r) {
        r.prefix("/hello");
        r.get("/:name", &hello_controller::hello);
    }

    asio::awaitable<http::response> hello(http::request& req) {
        auto name = req.param("name");
        auto body =
            nlohmann::json{{"message", "hello, " + std::string(name)}, {"length", name.size()}}
                .dump();
        co_return http::response::text(std::move(body), http::status::ok, "application/json");
    }
};

struct figures {
    double rps = 0;
    double p99_ms = 0;
    double cpu_us = 0;  // this process's CPU time (user + system) per request
};

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
    auto command = "wrk -t1 -c" + std::to_string(o.connections) + " -d" +
                   std::to_string(o.duration) +
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
    return f;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// A collector that accepts every export: a bare Beast server in a child process.
pid_t start_collector(std::uint16_t& port) {
    asio::io_context io(1);
    tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = acceptor.local_endpoint().port();
    pid_t child = fork();
    if (child != 0) return child;  // the acceptor's socket closes in the parent
    using namespace keel::bench::bare;
    asio::co_spawn(io,
                   listen(acceptor,
                          [](const request&, response& res) {
                              res.set(bhttp::field::content_type, "application/json");
                              res.body() = "{}";
                          }),
                   asio::detached);
    io.run();
    _exit(0);
}

// A port nothing listens on.
std::uint16_t closed_port() {
    asio::io_context io;
    tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
    return a.local_endpoint().port();
}

// Waits until the exporter has sent or dropped everything recorded so far.
void drain(const http::otlp_exporter& e, std::uint64_t recorded) {
    for (int i = 0; i < 100; ++i) {
        auto s = e.stats();
        if (s.exported + s.dropped_queue_full + s.dropped_export_failed >= recorded) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

}  // namespace

int main(int argc, char** argv) {
    auto opts = parse(argc, argv);
    keel::trace::set_root_sampling(opts.sample_percent / 100.0);
    std::uint16_t collector_port = 0;
    pid_t collector = start_collector(collector_port);  // before any thread starts

    keel::log::configure({.min_level = keel::log::level::warn});
    keel::service service({.threads = 1, .handle_signals = false});
    keel::di::registry registry;
    registry.per_request<hello_controller>();
    auto container = registry.build();
    http::router router;
    http::metrics metrics;
    http::health health;
    http::install_defaults(router, metrics, health);
    http::mount<hello_controller>(router, container);

    http::otlp_exporter up(service,
                           {.endpoint = "http://127.0.0.1:" + std::to_string(collector_port),
                            .service_name = "keel-trace-bench"});
    http::otlp_exporter up_protobuf(
        service, {.endpoint = "http://127.0.0.1:" + std::to_string(collector_port),
                  .service_name = "keel-trace-bench",
                  .encoding = http::otlp_encoding::protobuf});
    http::otlp_exporter down(service,
                             {.endpoint = "http://127.0.0.1:" + std::to_string(closed_port()),
                              .service_name = "keel-trace-bench"});
    auto server_on = [&](http::otlp_exporter* sink) {
        return std::make_unique<http::server>(service, router,
                                              http::server_options{.address = "127.0.0.1",
                                                                   .port = 0,
                                                                   .metrics = &metrics,
                                                                   .health = &health,
                                                                   .spans = sink});
    };
    struct setup {
        std::string name;
        std::unique_ptr<http::server> server;
        http::otlp_exporter* exporter;
        std::uint64_t recorded = 0;
    };
    std::vector<setup> setups;
    setups.push_back({"off", server_on(nullptr), nullptr});
    setups.push_back({"on", server_on(&up), &up});
    setups.push_back({"on, protobuf", server_on(&up_protobuf), &up_protobuf});
    setups.push_back({"down", server_on(&down), &down});
    for (auto& s : setups) s.server->start();
    std::thread runner([&] { service.run(); });

    std::map<std::string, std::vector<double>> rps, p99, cpu, cpu_ratio, rps_ratio;
    for (int round = 0; round < opts.rounds; ++round) {
        std::map<std::string, figures> got;
        for (std::size_t i = 0; i < setups.size(); ++i) {
            auto& s = setups[(i + static_cast<std::size_t>(round)) % setups.size()];
            auto f = run_wrk(opts, s.server->port());
            // Requests and spans: one span per request, counted by wrk.
            if (s.exporter) {
                s.recorded += static_cast<std::uint64_t>(f.rps * opts.duration);
                drain(*s.exporter, s.recorded);
            }
            got[s.name] = f;
        }
        std::cerr << "round " << round + 1 << ":";
        for (auto& [name, f] : got) {
            std::cerr << " " << name << " " << f.rps << " req/s " << f.cpu_us << " us cpu/req;";
            rps[name].push_back(f.rps);
            p99[name].push_back(f.p99_ms);
            cpu[name].push_back(f.cpu_us);
            cpu_ratio[name].push_back(f.cpu_us / got["off"].cpu_us);
            rps_ratio[name].push_back(f.rps / got["off"].rps);
        }
        std::cerr << "\n";
    }

    service.stop();
    runner.join();
    kill(collector, SIGTERM);
    waitpid(collector, nullptr, 0);

    std::printf(
        "| tracing | req/s (median of %d) | p99 latency (ms) | CPU per request (us) | CPU per "
        "request / off | req/s / off |\n|---|---|---|---|---|---|\n",
        opts.rounds);
    for (const auto& s : setups)
        std::printf("| %s | %.0f | %.2f | %.1f | %.3f | %.3f |\n", s.name.c_str(),
                    median(rps[s.name]), median(p99[s.name]), median(cpu[s.name]),
                    median(cpu_ratio[s.name]), median(rps_ratio[s.name]));
    for (const auto& s : setups) {
        if (!s.exporter) continue;
        auto st = s.exporter->stats();
        std::printf(
            "\n%s: %llu spans exported in %llu batches, %llu dropped (queue full), %llu "
            "dropped (export failed)",
            s.name.c_str(), static_cast<unsigned long long>(st.exported),
            static_cast<unsigned long long>(st.batches),
            static_cast<unsigned long long>(st.dropped_queue_full),
            static_cast<unsigned long long>(st.dropped_export_failed));
    }
    std::printf("\n");
    return 0;
}
