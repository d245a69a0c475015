#include "http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <optional>
#include <sstream>

#include "errors.hpp"

namespace keel::cli {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;

namespace {

constexpr std::size_t max_answer_bytes = 256 * 1024 * 1024;

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
    if (text.size() < prefix.size()) return false;
    for (std::size_t i = 0; i < prefix.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(text[i])) != prefix[i]) return false;
    return true;
}

[[noreturn]] void bad_url(std::string_view text, std::string_view why) {
    throw usage_error("--url " + std::string(text) + ": " + std::string(why));
}

void parse_port(std::string_view digits, url& out) {
    bool ok = !digits.empty() && digits.size() <= 5 &&
              digits.find_first_not_of("0123456789") == std::string_view::npos;
    if (!ok || std::stoi(std::string(digits)) == 0 || std::stoi(std::string(digits)) > 65535)
        bad_url(out.text, "the port must be a number from 1 to 65535");
    out.port = std::string(digits);
}

void parse_authority(std::string_view authority, url& out) {
    if (authority.find('@') != std::string_view::npos)
        bad_url(out.text, "user info is not supported (give the token with --token)");
    std::string_view port;
    if (authority.starts_with('[')) {
        auto close = authority.find(']');
        if (close == std::string_view::npos) bad_url(out.text, "unterminated IPv6 address");
        out.host = std::string(authority.substr(1, close - 1));
        auto rest = authority.substr(close + 1);
        if (!rest.empty() && !rest.starts_with(':')) bad_url(out.text, "bad text after the host");
        port = rest.empty() ? rest : rest.substr(1);
        if (!rest.empty()) parse_port(port, out);
    } else {
        auto colon = authority.find(':');
        out.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) parse_port(authority.substr(colon + 1), out);
    }
    if (out.host.empty()) bad_url(out.text, "the host is missing");
}

std::string seconds_text(std::chrono::milliseconds timeout) {
    std::ostringstream out;
    out << static_cast<double>(timeout.count()) / 1000.0 << "s";
    return out.str();
}

bool closed_by_peer(const beast::error_code& ec) {
    return ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
           ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

}  // namespace

url parse_url(std::string_view text) {
    url out;
    out.text = std::string(text);
    if (starts_with_nocase(text, "https://"))
        bad_url(text,
                "https:// is not supported: keel speaks plain http:// only (reach the admin "
                "port through an SSH tunnel or a local proxy)");
    if (!starts_with_nocase(text, "http://")) bad_url(text, "expected http://host[:port][/path]");
    auto rest = text.substr(7);
    if (rest.find_first_of("?#") != std::string_view::npos)
        bad_url(text, "a query or fragment is not allowed");
    auto slash = rest.find('/');
    parse_authority(rest.substr(0, slash), out);
    if (slash != std::string_view::npos) out.base_path = std::string(rest.substr(slash));
    while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
    return out;
}

struct http_client::impl {
    impl(url b, std::chrono::milliseconds t)
        : base(std::move(b)), timeout(t), resolver(io), socket(io) {}

    // Runs the operation `start` begins until it completes or the deadline passes; then the
    // socket is closed, the operation drained, and timed_out returned.
    template <class Start>
    beast::error_code run(Start start, steady::time_point deadline) {
        std::optional<beast::error_code> result;
        start([&result](beast::error_code ec, auto&&...) { result = ec; });
        io.restart();
        io.run_until(deadline);
        if (result) return *result;
        beast::error_code ignored;
        socket.close(ignored);
        resolver.cancel();
        io.restart();
        io.run();
        return asio::error::timed_out;
    }

    [[noreturn]] void fail(std::string_view what, const beast::error_code& ec) const {
        if (ec == asio::error::timed_out)
            throw transport_error("no answer from " + base.text + " within " +
                                  seconds_text(timeout));
        throw transport_error(std::string(what) + " " + base.text + ": " + ec.message());
    }

    void connect(steady::time_point deadline) {
        beast::error_code ignored;
        socket.close(ignored);
        buffer.clear();
        tcp::resolver::results_type endpoints;
        auto ec = run(
            [&](auto done) {
                resolver.async_resolve(
                    base.host, base.port,
                    [&endpoints, done](beast::error_code e, tcp::resolver::results_type r) mutable {
                        endpoints = std::move(r);
                        done(e);
                    });
            },
            deadline);
        if (ec) fail("cannot resolve the host of", ec);
        ec = run([&](auto done) { asio::async_connect(socket, endpoints, done); }, deadline);
        if (ec) fail("cannot connect to", ec);
    }

    // The answer, or nothing when a kept-alive connection turns out closed by the service
    // before it answered (so the request may be sent again on a new one).
    std::optional<http_response> exchange(const bhttp::request<bhttp::string_body>& req,
                                          steady::time_point deadline) {
        auto ec = run([&](auto done) { bhttp::async_write(socket, req, done); }, deadline);
        if (ec && closed_by_peer(ec)) return std::nullopt;
        if (ec) fail("cannot send to", ec);
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(max_answer_bytes);
        ec = run([&](auto done) { bhttp::async_read(socket, buffer, parser, done); }, deadline);
        if (ec && closed_by_peer(ec) && !parser.got_some()) return std::nullopt;
        if (ec) fail("cannot read the answer of", ec);
        return answer(parser.release());
    }

    http_response answer(bhttp::response<bhttp::string_body> msg) {
        if (!msg.keep_alive()) {
            beast::error_code ignored;
            socket.close(ignored);
        }
        return {static_cast<int>(msg.result_int()), std::string(msg[bhttp::field::content_type]),
                std::move(msg.body())};
    }

    std::string host_field() const {
        auto host = base.host.find(':') == std::string::npos ? base.host : "[" + base.host + "]";
        return base.port == "80" ? host : host + ":" + base.port;
    }

    bhttp::request<bhttp::string_body> message(const http_request& request) const {
        bhttp::request<bhttp::string_body> req;
        req.method_string(request.method);
        req.target(base.base_path + request.target);
        req.version(11);
        req.set(bhttp::field::host, host_field());
        req.set(bhttp::field::user_agent, "keel-cli");
        req.set(bhttp::field::accept, "application/json");
        for (const auto& [name, value] : request.headers) req.set(name, value);
        req.body() = request.body;
        req.prepare_payload();
        return req;
    }

    url base;
    std::chrono::milliseconds timeout;
    asio::io_context io;
    tcp::resolver resolver;
    tcp::socket socket;
    beast::flat_buffer buffer;
};

http_client::http_client(url base, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>(std::move(base), timeout)) {}
http_client::~http_client() = default;
http_client::http_client(http_client&&) noexcept = default;
http_client& http_client::operator=(http_client&&) noexcept = default;

const url& http_client::base() const {
    return impl_->base;
}

http_response http_client::send(const http_request& request) {
    auto& s = *impl_;
    auto deadline = steady::now() + s.timeout;
    auto req = s.message(request);
    if (s.socket.is_open())
        if (auto res = s.exchange(req, deadline)) return std::move(*res);
    s.connect(deadline);
    auto res = s.exchange(req, deadline);
    if (!res) throw transport_error(s.base.text + " closed the connection without answering");
    return std::move(*res);
}

}  // namespace keel::cli
