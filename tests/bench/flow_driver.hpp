#pragma once
// The order-flow load's clients (orders_load.cpp): keep-alive HTTP/1.1 connections used from
// coroutines, and how the clients share the machine with what they measure:
//
//   threads: each client on a thread of its own, asleep in the kernel while it waits for a
//            response, as blocking clients are; every response wakes a thread.
//   loop:    all clients on one thread's event loop, as a load balancer or a proxy in front
//            of a service runs them; a response that finds the loop busy wakes nobody.
//
// On two cores the driver's own CPU time and wake-ups land on the cores the service and
// Redis run on, so the mode is part of every figure measured under it (docs/benchmarks.md,
// "The service and Redis taking turns, and a driver on one thread").
//
//   run_clients(driver_mode::loop, 32, [&](asio::any_io_executor ex, int i) {
//       return client_coroutine(ex, i);
//   });

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <keel/http/message.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace keel::bench {

namespace asio = boost::asio;

enum class driver_mode { threads, loop };

std::optional<driver_mode> parse_driver_mode(std::string_view text);
std::string_view to_string(driver_mode mode);

struct http_reply {
    keel::http::status status = keel::http::status::ok;
    std::string body;
};

// One keep-alive connection to 127.0.0.1:port. Each request has a deadline (`timeout`) and
// throws std::runtime_error when it fails or passes it; a kept-alive connection the server
// closed meanwhile is replaced once. One coroutine at a time.
class http_connection {
  public:
    http_connection(asio::any_io_executor ex, std::uint16_t port,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10));
    ~http_connection();
    http_connection(http_connection&&) noexcept;
    http_connection& operator=(http_connection&&) noexcept;

    asio::awaitable<http_reply> get(std::string target);
    asio::awaitable<http_reply> post_json(std::string target, const nlohmann::json& body);

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

// Waits on the calling coroutine's executor.
asio::awaitable<void> sleep_until(std::chrono::steady_clock::time_point when);
asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration how_long);

// Runs client(executor, i) for i in [0, clients) to their ends: each on a thread and an
// io_context of its own (threads) or all on one io_context on the calling thread (loop).
// An exception that escapes a client is rethrown here after all have ended.
using client_body = std::function<asio::awaitable<void>(asio::any_io_executor, int)>;
void run_clients(driver_mode mode, int clients, const client_body& client);

}  // namespace keel::bench
