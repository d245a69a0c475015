// keel::http::client against a plain Boost.Beast client loop doing the same work, in the
// same process and the same run, over plain HTTP and over TLS, with connections reused.
//
//   keel_client_bench [--seconds S] [--concurrency N] [--rounds R]
//
// The server: Keel's http::server on one service thread, a plain port and a TLS port (a
// certificate from a CA made at start), answering GET /hello with "hello". The clients run
// on the calling thread, one after the other: N coroutines, each sending one request after
// another on a kept-alive connection and reading the whole response.
//   keel:  client.request(client_request::get(url)): the URL parsed, the pool, timeouts,
//          metrics, the response reader's checks (max N connections per origin).
//   beast: N connections made once (TLS: verified against the CA, host checked), then
//          http::async_write and http::async_read on each.
// Figures: requests/s and the client thread's CPU per request (CLOCK_THREAD_CPUTIME_ID).
// Rounds alternate keel and beast; a ratio is the median of the per-round ratios.

#include <time.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <keel/framework/service.hpp>
#include <keel/http/client.hpp>
#include <keel/http/router.hpp>
#include <keel/http/server.hpp>
#include <string>
#include <thread>
#include <vector>

#include "rounds.hpp"
#include "tls_support.hpp"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace http = keel::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;

namespace {

struct options {
    double seconds = 3;
    int concurrency = 16;
    int rounds = 5;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--seconds")
            o.seconds = std::stod(argv[i + 1]);
        else if (flag == "--concurrency")
            o.concurrency = std::stoi(argv[i + 1]);
        else if (flag == "--rounds")
            o.rounds = std::stoi(argv[i + 1]);
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    return o;
}

double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

struct figures {
    double rps = 0;
    double cpu_us = 0;  // the client thread's CPU per request
};

// Runs `loops` coroutines on a fresh io_context on this thread until `until`.
template <class Spawn>
figures measure(const options& o, Spawn spawn) {
    asio::io_context io(1);
    std::uint64_t done = 0;
    auto until = steady::now() + std::chrono::duration_cast<steady::duration>(
                                     std::chrono::duration<double>(o.seconds));
    spawn(io, until, done);
    auto cpu = thread_cpu_seconds();
    auto start = steady::now();
    io.run();
    double wall = std::chrono::duration<double>(steady::now() - start).count();
    cpu = thread_cpu_seconds() - cpu;
    return {double(done) / wall, cpu / double(done) * 1e6};
}

void rethrow(std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
}

asio::awaitable<void> keel_loop(http::client& c, std::string url, steady::time_point until,
                                std::uint64_t& done) {
    while (steady::now() < until) {
        auto req = http::client_request::get(url);
        auto res = co_await c.request(std::move(req));
        if (!res) throw std::runtime_error("keel: " + res.error().message);
        if (res->body() != "hello") throw std::runtime_error("keel: unexpected body");
        ++done;
    }
}

figures run_keel(const options& o, const std::string& url) {
    return measure(o, [&](asio::io_context& io, steady::time_point until, std::uint64_t& done) {
        // The client lives as long as the io_context's run: owned by the spawned work.
        auto c = std::make_shared<http::client>(
            io, http::client_options{
                    .max_connections_per_origin = static_cast<std::size_t>(o.concurrency),
                    .tls = {.ca_file = keel::http::client_test::pki().ca}});
        for (int i = 0; i < o.concurrency; ++i)
            asio::co_spawn(
                io,
                [c, url, until, &done]() -> asio::awaitable<void> {
                    co_await keel_loop(*c, url, until, done);
                },
                rethrow);
    });
}

template <class Stream>
asio::awaitable<void> beast_exchange(Stream& stream, steady::time_point until,
                                     std::uint64_t& done) {
    bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/hello", 11};
    req.set(bhttp::field::host, "127.0.0.1");
    req.set(bhttp::field::user_agent, "beast");
    beast::flat_buffer buffer;
    while (steady::now() < until) {
        co_await bhttp::async_write(stream, req, asio::use_awaitable);
        bhttp::response<bhttp::string_body> res;
        co_await bhttp::async_read(stream, buffer, res, asio::use_awaitable);
        if (res.body() != "hello") throw std::runtime_error("beast: unexpected body");
        ++done;
    }
}

asio::awaitable<void> beast_plain(tcp::endpoint where, steady::time_point until,
                                  std::uint64_t& done) {
    beast::tcp_stream stream(co_await asio::this_coro::executor);
    co_await stream.async_connect(where, asio::use_awaitable);
    stream.socket().set_option(tcp::no_delay(true));
    co_await beast_exchange(stream, until, done);
}

asio::awaitable<void> beast_tls(asio::ssl::context& tls, tcp::endpoint where,
                                steady::time_point until, std::uint64_t& done) {
    beast::ssl_stream<beast::tcp_stream> stream(co_await asio::this_coro::executor, tls);
    stream.set_verify_mode(asio::ssl::verify_peer);
    stream.set_verify_callback(asio::ssl::host_name_verification("127.0.0.1"));
    co_await beast::get_lowest_layer(stream).async_connect(where, asio::use_awaitable);
    beast::get_lowest_layer(stream).socket().set_option(tcp::no_delay(true));
    co_await stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
    co_await beast_exchange(stream, until, done);
}

figures run_beast(const options& o, tcp::endpoint where, asio::ssl::context* tls) {
    return measure(o, [&](asio::io_context& io, steady::time_point until, std::uint64_t& done) {
        for (int i = 0; i < o.concurrency; ++i) {
            if (tls)
                asio::co_spawn(io, beast_tls(*tls, where, until, done), rethrow);
            else
                asio::co_spawn(io, beast_plain(where, until, done), rethrow);
        }
    });
}

}  // namespace

int main(int argc, char** argv) try {
    auto o = parse(argc, argv);
    keel::log::configure({.min_level = keel::log::level::warn});
    const auto& pki = keel::http::client_test::pki();

    keel::service service({.threads = 1, .handle_signals = false});
    http::router router;
    router.get("/hello", [](http::request&) -> asio::awaitable<http::response> {
        co_return http::response::text("hello");
    });
    http::server plain(service, router, {.address = "127.0.0.1", .port = 0});
    http::server_options tls_options{.address = "127.0.0.1", .port = 0};
    tls_options.tls = {.certificate_file = pki.good.cert, .private_key_file = pki.good.key};
    http::server secure(service, router, tls_options);
    plain.start();
    secure.start();
    std::thread server_thread([&] { service.run(); });

    asio::ssl::context beast_tls_context(asio::ssl::context::tls_client);
    beast_tls_context.load_verify_file(pki.ca);
    const auto loopback = asio::ip::make_address("127.0.0.1");

    struct transport {
        const char* name;
        std::string url;
        tcp::endpoint where;
        asio::ssl::context* tls;
        std::vector<double> keel_rps, beast_rps, keel_cpu, beast_cpu, rps_ratio, cpu_ratio;
    };
    std::vector<transport> transports{
        {"plain",
         "http://127.0.0.1:" + std::to_string(plain.port()) + "/hello",
         {loopback, plain.port()},
         nullptr},
        {"TLS",
         "https://127.0.0.1:" + std::to_string(secure.port()) + "/hello",
         {loopback, secure.port()},
         &beast_tls_context},
    };
    for (int round = 0; round < o.rounds; ++round) {
        for (auto& t : transports) {
            auto k = run_keel(o, t.url);
            auto b = run_beast(o, t.where, t.tls);
            std::cerr << "round " << round + 1 << " " << t.name << ": keel " << int(k.rps)
                      << " req/s " << k.cpu_us << " us/req; beast " << int(b.rps) << " req/s "
                      << b.cpu_us << " us/req\n";
            t.keel_rps.push_back(k.rps);
            t.beast_rps.push_back(b.rps);
            t.keel_cpu.push_back(k.cpu_us);
            t.beast_cpu.push_back(b.cpu_us);
            t.rps_ratio.push_back(k.rps / b.rps);
            t.cpu_ratio.push_back(b.cpu_us / k.cpu_us);
        }
    }
    service.stop();
    server_thread.join();

    using keel::bench::median_and_range;
    using keel::bench::percentile;
    std::printf(
        "\n| transport | keel req/s | beast req/s | keel/beast req/s | keel CPU us/req | beast CPU "
        "us/req | beast/keel CPU per request |\n|---|---|---|---|---|---|---|\n");
    for (auto& t : transports)
        std::printf("| %s | %.0f | %.0f | %s | %.1f | %.1f | %s |\n", t.name,
                    percentile(t.keel_rps, 0.5), percentile(t.beast_rps, 0.5),
                    median_and_range(t.rps_ratio).c_str(), percentile(t.keel_cpu, 0.5),
                    percentile(t.beast_cpu, 0.5), median_and_range(t.cpu_ratio).c_str());
    return 0;
} catch (const std::exception& e) {
    std::cerr << "keel_client_bench: " << e.what() << "\n";
    return 1;
}
