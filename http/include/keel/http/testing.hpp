#pragma once

/// @file
/// Testing support (target keel::http_testing): serve a router on loopback inside a test
/// and talk to it with real HTTP.
///
/// @code
///   http::router router;
///   router.get("/hello/:name", ...);
///   http::testing::test_server server(router);        // 127.0.0.1, ephemeral port
///   auto client = server.client();
///   auto res = client.get("/hello/ada");
///   EXPECT_EQ(res.status, http::status::ok);
///   EXPECT_EQ(res.json()["message"], "hello, ada");
///   auto created = client.post_json("/orders", {{"sku", "x"}});
/// @endcode
///
/// test_client is synchronous and keeps its connection alive between requests; every
/// operation has a deadline (`timeout`) and throws std::runtime_error instead of hanging.
/// raw_connection sends arbitrary bytes (malformed requests, pipelining, slow clients).

#include <chrono>
#include <cstdint>
#include <keel/framework/service.hpp>
#include <keel/http/message.hpp>
#include <keel/http/server.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace keel::http::testing {

/// A response as test_client or raw_connection read it.
struct test_response {
    /// The status.
    http::status status = http::status::ok;
    /// The header fields.
    http::headers headers;
    /// The body.
    std::string body;
    /// Whether the server keeps the connection open after this response.
    bool keep_alive = true;

    /// A header field's value; nullopt when absent.
    std::optional<std::string_view> header(std::string_view name) const {
        return headers.get(name);
    }
    /// The body parsed as JSON; throws nlohmann::json::parse_error when it is not.
    nlohmann::json json() const;
};

/// A synchronous HTTP/1.1 client on one keep-alive connection. When the server has closed
/// the kept-alive connection in the meantime, the request is retried once on a new one.
/// Not thread-safe: one client per thread.
class test_client {
  public:
    /// Connects to `host`:`port`; `timeout` bounds every operation.
    test_client(std::string host, std::uint16_t port,
                std::chrono::milliseconds timeout = std::chrono::seconds(10));
    ~test_client();
    ///@{
    /// Moves the connection.
    test_client(test_client&&) noexcept;
    test_client& operator=(test_client&&) noexcept;
    ///@}

    /// Sends a request and reads its response.
    test_response request(http::method m, std::string_view target, std::string body = {},
                          const http::headers& headers = {});
    /// A GET of `target`.
    test_response get(std::string_view target, const http::headers& headers = {}) {
        return request(method::get, target, {}, headers);
    }
    /// A DELETE of `target`.
    test_response del(std::string_view target, const http::headers& headers = {}) {
        return request(method::del, target, {}, headers);
    }
    /// Sends `body` serialised with Content-Type: application/json.
    test_response post_json(std::string_view target, const nlohmann::json& body,
                            http::headers headers = {});
    /// Sends `body` serialised with Content-Type: application/json.
    test_response put_json(std::string_view target, const nlohmann::json& body,
                           http::headers headers = {});

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// A raw TCP connection for tests of malformed or unusual traffic.
class raw_connection {
  public:
    /// `source`: the local address to connect from ("127.0.0.2": another loopback client);
    /// empty: the system's choice.
    raw_connection(std::string host, std::uint16_t port,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10),
                   std::string source = {});
    ~raw_connection();
    ///@{
    /// Moves the connection.
    raw_connection(raw_connection&&) noexcept;
    raw_connection& operator=(raw_connection&&) noexcept;
    ///@}

    /// Writes `bytes` as they are.
    void send(std::string_view bytes);
    /// Reads one response; empty when the server closed the connection first.
    std::optional<test_response> read_response();
    /// True when the server closes the connection (EOF or reset) within the timeout,
    /// discarding anything it sends before.
    bool wait_closed();

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// How a test_server runs.
struct test_server_options {
    /// Service threads.
    std::size_t threads = 1;
    server_options server;  ///< address/port are forced to 127.0.0.1:0
    /// How long shutdown waits for in-flight requests.
    std::chrono::milliseconds drain_timeout{5'000};
};

/// A keel::service running `router` on loopback on a background thread. The destructor
/// shuts it down gracefully and waits. The router must outlive the test_server.
class test_server {
  public:
    /// Starts serving `router` on 127.0.0.1 on an ephemeral port.
    explicit test_server(const http::router& router, test_server_options options = {});
    ~test_server();
    test_server(const test_server&) = delete;
    test_server& operator=(const test_server&) = delete;

    /// The port it listens on.
    std::uint16_t port() const { return server_->port(); }
    /// The service that runs the server.
    keel::service& service() { return *service_; }
    /// The HTTP server.
    http::server& server() { return *server_; }
    /// A client connected to the server.
    test_client client(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
        return test_client("127.0.0.1", port(), timeout);
    }
    /// A raw connection to the server.
    raw_connection raw(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
        return raw_connection("127.0.0.1", port(), timeout);
    }
    /// Begins graceful shutdown and returns at once.
    void begin_stop() { service_->stop(); }
    /// Waits until the service has shut down (run() returned). Idempotent.
    void wait_stopped();

  private:
    std::unique_ptr<keel::service> service_;
    std::unique_ptr<http::server> server_;
    std::thread runner_;
};

}  // namespace keel::http::testing
