#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <keel/http/testing.hpp>
#include <stdexcept>

namespace keel::http::testing {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// A socket whose every operation runs on a private io_context under a deadline.
struct timed_socket {
    timed_socket(std::string h, std::uint16_t p, std::chrono::milliseconds t, std::string from = {})
        : host(std::move(h)), port(p), timeout(t), source(std::move(from)), socket(io) {}

    // Runs the operation started by `start` to completion or until the deadline; on
    // timeout the socket is closed and `timed_out` returned.
    template <class Start>
    beast::error_code run(Start start) {
        std::optional<beast::error_code> result;
        start([&](beast::error_code ec, auto&&...) { result = ec; });
        io.restart();
        io.run_for(timeout);
        if (result) return *result;
        beast::error_code ignored;
        socket.close(ignored);
        io.restart();
        io.run();
        return asio::error::timed_out;
    }

    void connect() {
        beast::error_code ignored;
        socket.close(ignored);
        buffer.clear();
        tcp::resolver resolver(io);
        auto endpoints = resolver.resolve(host, std::to_string(port));
        beast::error_code ec;
        if (source.empty()) {
            ec = run([&](auto h) { asio::async_connect(socket, endpoints, std::move(h)); });
        } else {
            auto to = endpoints.begin()->endpoint();
            socket.open(to.protocol());
            socket.bind(tcp::endpoint(asio::ip::make_address(source), 0));
            ec = run([&](auto h) { socket.async_connect(to, std::move(h)); });
        }
        if (ec)
            throw std::runtime_error("cannot connect to " + host + ":" + std::to_string(port) +
                                     ": " + ec.message());
    }

    void send(std::string_view bytes) {
        auto ec = run([&](auto h) {
            asio::async_write(socket, asio::buffer(bytes.data(), bytes.size()), std::move(h));
        });
        if (ec) throw std::runtime_error("send failed: " + ec.message());
    }

    // Reads one response; empty on a clean close before any byte of it.
    std::optional<test_response> read(bool head_request) {
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(boost::none);
        parser.skip(head_request);
        auto ec = run([&](auto h) { bhttp::async_read(socket, buffer, parser, std::move(h)); });
        if (ec == bhttp::error::end_of_stream || ec == asio::error::connection_reset)
            return std::nullopt;
        if (ec) throw std::runtime_error("reading the response failed: " + ec.message());
        auto& msg = parser.get();
        test_response out;
        out.status = static_cast<http::status>(msg.result_int());
        for (const auto& f : msg)
            out.headers.add(std::string(f.name_string()), std::string(f.value()));
        out.body = std::move(msg.body());
        out.keep_alive = msg.keep_alive();
        return out;
    }

    std::string host;
    std::uint16_t port;
    std::chrono::milliseconds timeout;
    std::string source;
    asio::io_context io;
    tcp::socket socket;
    beast::flat_buffer buffer;
};

std::string serialise(http::method m, std::string_view target, std::string_view host,
                      const std::string& body, const http::headers& headers) {
    bhttp::request<bhttp::string_body> req;
    req.method_string(to_string(m));
    req.target(target);
    req.version(11);
    req.set(bhttp::field::host, host);
    for (const auto& [name, value] : headers) req.insert(name, value);
    req.body() = body;
    if (!body.empty() || m == method::post || m == method::put || m == method::patch)
        req.prepare_payload();
    std::ostringstream out;
    out << req;
    return out.str();
}

}  // namespace

nlohmann::json test_response::json() const {
    return nlohmann::json::parse(body);
}

struct test_client::impl : timed_socket {
    using timed_socket::timed_socket;
};

test_client::test_client(std::string host, std::uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>(std::move(host), port, timeout)) {}
test_client::~test_client() = default;
test_client::test_client(test_client&&) noexcept = default;
test_client& test_client::operator=(test_client&&) noexcept = default;

test_response test_client::request(http::method m, std::string_view target, std::string body,
                                   const http::headers& headers) {
    auto& s = *impl_;
    auto wire = serialise(m, target, s.host, body, headers);
    // A kept-alive connection the server has since closed (idle timeout) is replaced once,
    // as browsers do; a fresh connection that fails is an error.
    bool reused = s.socket.is_open();
    std::optional<test_response> res;
    try {
        if (!reused) s.connect();
        s.send(wire);
        res = s.read(m == method::head);
    } catch (const std::runtime_error&) {
        if (!reused) throw;
    }
    if (!res && reused) {
        s.connect();
        s.send(wire);
        res = s.read(m == method::head);
    }
    if (!res) throw std::runtime_error("the server closed the connection without a response");
    if (!res->keep_alive) {
        beast::error_code ignored;
        s.socket.close(ignored);
    }
    return std::move(*res);
}

test_response test_client::post_json(std::string_view target, const nlohmann::json& body,
                                     http::headers headers) {
    headers.set("Content-Type", "application/json");
    return request(method::post, target, body.dump(), headers);
}

test_response test_client::put_json(std::string_view target, const nlohmann::json& body,
                                    http::headers headers) {
    headers.set("Content-Type", "application/json");
    return request(method::put, target, body.dump(), headers);
}

struct raw_connection::impl : timed_socket {
    using timed_socket::timed_socket;
};

raw_connection::raw_connection(std::string host, std::uint16_t port,
                               std::chrono::milliseconds timeout, std::string source)
    : impl_(std::make_unique<impl>(std::move(host), port, timeout, std::move(source))) {
    impl_->connect();
}
raw_connection::~raw_connection() = default;
raw_connection::raw_connection(raw_connection&&) noexcept = default;
raw_connection& raw_connection::operator=(raw_connection&&) noexcept = default;

void raw_connection::send(std::string_view bytes) {
    impl_->send(bytes);
}

std::optional<test_response> raw_connection::read_response() {
    return impl_->read(false);
}

bool raw_connection::wait_closed() {
    auto& s = *impl_;
    std::array<char, 4096> scratch;
    for (;;) {
        std::size_t got = 0;
        auto ec = s.run([&](auto h) {
            s.socket.async_read_some(
                asio::buffer(scratch),
                [&got, h = std::move(h)](beast::error_code e, std::size_t n) mutable {
                    got = n;
                    h(e);
                });
        });
        if (ec == asio::error::timed_out) return false;
        if (ec) return true;
        (void)got;
    }
}

}  // namespace keel::http::testing
