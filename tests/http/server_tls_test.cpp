// keel's server over TLS: requests verified by keel's client, plain HTTP and silent clients
// on the TLS port, mutual TLS, certificate reloads (SIGHUP, the file check, bad files), the
// connection caps and graceful shutdown, with certificates made at run time
// (tls_support.cpp).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <keel/framework/config.hpp>
#include <keel/http/client.hpp>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <keel/test/run.hpp>
#include <sstream>
#include <thread>

#include "tls_support.hpp"

namespace keel::http::client_test {
namespace {

namespace ssl = asio::ssl;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using error_code = boost::system::error_code;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

router hello_router(std::atomic<int>* served = nullptr) {
    router r;
    r.get("/hello", [served](request&) -> asio::awaitable<response> {
        if (served) ++*served;
        co_return response::text("hello");
    });
    r.get("/slow", [](request&) -> asio::awaitable<response> {
        asio::steady_timer t(co_await asio::this_coro::executor, 400ms);
        co_await t.async_wait(asio::use_awaitable);
        co_return response::text("slow");
    });
    return r;
}

testing::test_server_options tls_options(const cert_files& identity, std::string client_ca = {}) {
    testing::test_server_options o;
    o.server.tls.certificate_file = identity.cert;
    o.server.tls.private_key_file = identity.key;
    o.server.tls.client_ca_file = std::move(client_ca);
    o.server.tls.reload_check = 0ms;
    return o;
}

std::string https(std::uint16_t port, std::string_view path = "/hello") {
    return "https://localhost:" + std::to_string(port) + std::string(path);
}

client::result fetch(asio::io_context& io, client& c, std::string url) {
    return keel::test::run(io, c.request(client_request::get(std::move(url))), 10s);
}

client_options trusting_test_ca(const cert_files* identity = nullptr) {
    client_options o;
    o.tls.ca_file = pki().ca;
    if (identity) {
        o.tls.certificate_file = identity->cert;
        o.tls.private_key_file = identity->key;
    }
    return o;
}

// A TLS connection made by hand, to see the certificate the server presents and to keep a
// connection open across a reload. Every operation is bounded (5 s).
class tls_probe {
  public:
    explicit tls_probe(std::uint16_t port, const cert_files* identity = nullptr)
        : context_(ssl::context::tls_client), stream_(io_, context_) {
        context_.load_verify_file(pki().ca);
        context_.set_verify_mode(ssl::verify_peer);
        if (identity) {
            context_.use_certificate_chain_file(identity->cert);
            context_.use_private_key_file(identity->key, ssl::context::pem);
        }
        SSL_set_tlsext_host_name(stream_.native_handle(), "localhost");
        X509_VERIFY_PARAM_set1_host(SSL_get0_param(stream_.native_handle()), "localhost", 0);
        tcp::endpoint at(asio::ip::make_address("127.0.0.1"), port);
        handshake_error_ = run([&]() -> asio::awaitable<error_code> {
            auto [cec] = co_await stream_.next_layer().async_connect(at, use_tuple);
            if (cec) co_return cec;
            auto [hec] = co_await stream_.async_handshake(ssl::stream_base::client, use_tuple);
            co_return hec;
        }());
    }

    bool connected() const { return !handshake_error_; }
    const error_code& handshake_error() const { return handshake_error_; }

    std::string certificate_cn() {
        X509* cert = SSL_get0_peer_certificate(stream_.native_handle());
        if (!cert) return {};
        char cn[256] = {};
        X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
        return cn;
    }
    std::string certificate_serial() {
        X509* cert = SSL_get0_peer_certificate(stream_.native_handle());
        if (!cert) return {};
        BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
        char* hex = BN_bn2hex(bn);
        std::string out = hex;
        OPENSSL_free(hex);
        BN_free(bn);
        return out;
    }

    // Sends a GET and reads its response (head and body); empty when the connection failed.
    std::string get(std::string_view target) {
        std::string request = "GET " + std::string(target) + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
        return run([&]() -> asio::awaitable<std::string> {
            auto [wec, w] = co_await asio::async_write(stream_, asio::buffer(request), use_tuple);
            if (wec) co_return std::string();
            auto [ec, n] = co_await asio::async_read_until(stream_, asio::dynamic_buffer(buffer_),
                                                           "\r\n\r\n", use_tuple);
            if (ec) co_return std::string();
            std::string head = buffer_.substr(0, n);
            std::size_t length = 0;
            if (auto at = head.find("Content-Length: "); at != std::string::npos)
                length = std::stoul(head.substr(at + 16));
            if (buffer_.size() < n + length) {
                auto [bec, m] = co_await asio::async_read(
                    stream_, asio::dynamic_buffer(buffer_),
                    asio::transfer_exactly(n + length - buffer_.size()), use_tuple);
                if (bec) co_return std::string();
            }
            std::string response = buffer_.substr(0, n + length);
            buffer_.erase(0, n + length);
            co_return response;
        }());
    }

    // Sends bytes as they are (inside TLS).
    void send(std::string bytes) {
        run([&]() -> asio::awaitable<bool> {
            auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(bytes), use_tuple);
            co_return !ec;
        }());
    }

    // Reads until the server ends the connection: asio::error::eof when it sent close_notify
    // first, ssl::error::stream_truncated when it closed the socket without one.
    error_code read_until_closed() {
        return run([&]() -> asio::awaitable<error_code> {
            std::array<char, 4096> scratch;
            for (;;) {
                auto [ec, n] = co_await stream_.async_read_some(asio::buffer(scratch), use_tuple);
                if (ec) co_return ec;
            }
        }());
    }

  private:
    template <class T>
    T run(asio::awaitable<T> task) {
        io_.restart();
        return keel::test::run(io_, std::move(task), 5s);
    }

    error_code handshake_error_;
    asio::io_context io_;
    ssl::context context_;
    ssl::stream<tcp::socket> stream_;
    std::string buffer_;
};

// A copy of a certificate and key in files a test may replace.
struct replaceable_identity {
    std::filesystem::path dir;
    cert_files files;

    explicit replaceable_identity(const cert_files& initial) {
        std::string pattern = (std::filesystem::temp_directory_path() / "keel-tls-XXXXXX").string();
        if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
        dir = pattern;
        files = {(dir / "cert.pem").string(), (dir / "key.pem").string()};
        replace(initial);
    }
    ~replaceable_identity() {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
    }
    // As a deployment does: each file written beside and renamed over the old one.
    void replace(const cert_files& with) {
        put(files.cert, read(with.cert));
        put(files.key, read(with.key));
    }
    void put(const std::string& path, const std::string& text) {
        auto next = path + ".next";
        std::ofstream(next, std::ios::binary | std::ios::trunc) << text;
        std::filesystem::rename(next, path);
    }
    static std::string read(const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        std::ostringstream text;
        text << in.rdbuf();
        return text.str();
    }
};

// What the process writes to stderr (the log) while it lives.
class stderr_capture {
  public:
    stderr_capture() {
        path_ = (std::filesystem::temp_directory_path() /
                 ("keel-tls-log-" + std::to_string(::getpid()) + ".txt"))
                    .string();
        std::fflush(stderr);
        saved_ = ::dup(STDERR_FILENO);
        int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
    }
    ~stderr_capture() {
        std::fflush(stderr);
        ::dup2(saved_, STDERR_FILENO);
        ::close(saved_);
        std::filesystem::remove(path_);
    }
    std::string text() const {
        std::fflush(stderr);
        return replaceable_identity::read(path_);
    }
    int count(std::string_view what) const {
        auto all = text();
        int n = 0;
        for (auto at = all.find(what); at != std::string::npos; at = all.find(what, at + 1)) ++n;
        return n;
    }

  private:
    std::string path_;
    int saved_ = -1;
};

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    auto deadline = steady::now() + limit;
    while (steady::now() < deadline) {
        if (done()) return true;
        std::this_thread::sleep_for(20ms);
    }
    return done();
}

std::string read_text(const std::string& path) {
    return replaceable_identity::read(path);
}

// ---------------------------------------------------------------------------------------

TEST(server_tls, a_request_over_tls_is_served_and_the_certificate_verified_by_the_client) {
    auto r = hello_router();
    testing::test_server server(r, tls_options(pki().good));
    asio::io_context io;
    client c(io, trusting_test_ca());
    for (int i = 0; i < 3; ++i) {
        auto res = fetch(io, c, https(server.port()));
        ASSERT_TRUE(res) << res.error().message;
        EXPECT_EQ(res->status(), status::ok);
        EXPECT_EQ(res->body(), "hello");
    }
    auto s = c.stats("https://localhost:" + std::to_string(server.port()));
    EXPECT_EQ(s.connections_opened, 1u);  // keep-alive over TLS
    EXPECT_EQ(s.connections_reused, 2u);

    // The client checked the chain: without the test CA, the same server is refused.
    client untrusting(io);
    auto refused = fetch(io, untrusting, https(server.port()));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().kind, client_error_kind::tls);
    EXPECT_NE(refused.error().message.find("unable to get local issuer certificate"),
              std::string::npos)
        << refused.error().message;

    tls_probe probe(server.port());
    ASSERT_TRUE(probe.connected()) << probe.handshake_error().message();
    EXPECT_EQ(probe.certificate_cn(), "localhost");
}

TEST(server_tls, plain_http_to_the_tls_port_is_answered_400_in_plain_text_and_closed) {
    auto r = hello_router();
    testing::test_server server(r, tls_options(pki().good));
    auto raw = server.raw(3s);
    raw.send("GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n");
    auto res = raw.read_response();
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status::bad_request);
    EXPECT_NE(res->body.find("HTTPS"), std::string::npos) << res->body;
    EXPECT_FALSE(res->keep_alive);
    EXPECT_TRUE(raw.wait_closed());

    // Bytes that are neither TLS nor HTTP: closed without an answer.
    auto garbage = server.raw(3s);
    garbage.send(std::string("\x01\x02\x03\x04garbage\r\n\r\n", 15));
    EXPECT_TRUE(garbage.wait_closed());

    // And the port still speaks TLS.
    asio::io_context io;
    client c(io, trusting_test_ca());
    auto ok = fetch(io, c, https(server.port()));
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->body(), "hello");
}

TEST(server_tls, a_client_that_never_completes_the_handshake_is_dropped_within_the_header_timeout) {
    auto r = hello_router();
    auto options = tls_options(pki().good);
    options.server.header_timeout = 300ms;
    testing::test_server server(r, options);

    // Connects and sends nothing.
    auto silent = server.raw(5s);
    auto start = steady::now();
    EXPECT_TRUE(silent.wait_closed());
    auto silent_for = steady::now() - start;
    EXPECT_GE(silent_for, 250ms);
    EXPECT_LT(silent_for, 1500ms);

    // Sends the first bytes of a ClientHello record, then stalls.
    auto stalled = server.raw(5s);
    start = steady::now();
    stalled.send(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11));
    EXPECT_TRUE(stalled.wait_closed());
    auto stalled_for = steady::now() - start;
    EXPECT_GE(stalled_for, 250ms);
    EXPECT_LT(stalled_for, 1500ms);

    // Completes the handshake, then trickles a header: the header deadline holds as for
    // plain HTTP.
    tls_probe slow(server.port());
    ASSERT_TRUE(slow.connected()) << slow.handshake_error().message();
    start = steady::now();
    slow.send("GET /hello HTTP/1.1\r\n");
    auto ended = slow.read_until_closed();
    EXPECT_TRUE(ended) << "the connection should have been closed";
    EXPECT_LT(steady::now() - start, 1500ms);

    tls_probe fine(server.port());
    ASSERT_TRUE(fine.connected()) << fine.handshake_error().message();
    EXPECT_NE(fine.get("/hello").find("200 OK"), std::string::npos);
}

TEST(server_tls, mutual_tls_refuses_no_certificate_and_a_strangers_and_accepts_the_right_one) {
    std::atomic<int> served{0};
    auto r = hello_router(&served);
    testing::test_server server(r, tls_options(pki().good, pki().ca));
    asio::io_context io;

    client without(io, trusting_test_ca());
    auto none = fetch(io, without, https(server.port()));
    ASSERT_FALSE(none) << "served without a client certificate: " << none->body();
    EXPECT_EQ(none.error().kind, client_error_kind::tls) << none.error().message;

    client stranger(io, trusting_test_ca(&pki().other_client));
    auto strange = fetch(io, stranger, https(server.port()));
    ASSERT_FALSE(strange) << "served a stranger: " << strange->body();
    EXPECT_EQ(strange.error().kind, client_error_kind::tls) << strange.error().message;
    EXPECT_EQ(served.load(), 0);

    client known(io, trusting_test_ca(&pki().client));
    auto ok = fetch(io, known, https(server.port()));
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->body(), "hello");
    EXPECT_EQ(served.load(), 1);
}

// Waits until a new connection is given the certificate named `cn` (a reload is not
// instant: a signal or the file check sets it, and the threads pick it up).
void expect_new_connections_to_see(std::uint16_t port, const std::string& cn) {
    std::string seen;
    EXPECT_TRUE(eventually([&] {
        tls_probe fresh(port);
        seen = fresh.certificate_cn();
        return seen == cn;
    })) << "a new connection still sees "
        << seen;
}

TEST(server_tls, sighup_serves_the_new_certificate_to_new_connections_and_open_ones_keep_working) {
    replaceable_identity identity(pki().good);
    auto r = hello_router();
    testing::test_server server(r, tls_options(identity.files));  // no file check: SIGHUP only

    tls_probe old_connection(server.port());
    ASSERT_TRUE(old_connection.connected()) << old_connection.handshake_error().message();
    auto old_serial = old_connection.certificate_serial();
    EXPECT_EQ(old_connection.certificate_cn(), "localhost");
    ASSERT_NE(old_connection.get("/hello").find("200 OK"), std::string::npos);
    asio::io_context io;
    client pooled(io, trusting_test_ca());
    ASSERT_TRUE(fetch(io, pooled, https(server.port())));

    identity.replace(pki().renewed);
    ASSERT_EQ(::kill(::getpid(), SIGHUP), 0);
    expect_new_connections_to_see(server.port(), "renewed.localhost");
    tls_probe fresh(server.port());
    ASSERT_TRUE(fresh.connected()) << fresh.handshake_error().message();
    EXPECT_NE(fresh.certificate_serial(), old_serial);

    // The connections opened before the reload keep their session and are still served.
    EXPECT_NE(old_connection.get("/hello").find("200 OK"), std::string::npos);
    EXPECT_EQ(old_connection.certificate_serial(), old_serial);
    auto again = fetch(io, pooled, https(server.port()));
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(pooled.stats("https://localhost:" + std::to_string(server.port())).connections_reused,
              1u);
}

TEST(server_tls, changed_files_are_picked_up_by_the_periodic_check_without_a_signal) {
    replaceable_identity identity(pki().good);
    auto r = hello_router();
    auto options = tls_options(identity.files);
    options.server.tls.reload_check = 100ms;
    testing::test_server server(r, options);
    {
        tls_probe before(server.port());
        ASSERT_EQ(before.certificate_cn(), "localhost");
    }
    identity.replace(pki().renewed);
    expect_new_connections_to_see(server.port(), "renewed.localhost");
}

TEST(server_tls, a_bad_replacement_keeps_the_old_certificate_and_is_logged_once) {
    replaceable_identity identity(pki().good);
    auto r = hello_router();
    auto options = tls_options(identity.files);
    options.server.tls.reload_check = 50ms;
    testing::test_server server(r, options);
    stderr_capture log;

    // A certificate file that is not PEM, noticed by the file check.
    identity.put(identity.files.cert, "not a certificate\n");
    EXPECT_TRUE(eventually([&] { return log.count("TLS reload") > 0; }));
    std::this_thread::sleep_for(400ms);  // several more checks
    EXPECT_EQ(log.count("TLS reload"), 1) << log.text();
    auto text = log.text();
    EXPECT_NE(text.find("still serving the previous certificate"), std::string::npos) << text;
    EXPECT_NE(text.find(identity.files.cert), std::string::npos) << text;
    EXPECT_NE(text.find("no PEM certificate in it"), std::string::npos) << text;
    {
        tls_probe probe(server.port());
        ASSERT_TRUE(probe.connected()) << probe.handshake_error().message();
        EXPECT_EQ(probe.certificate_cn(), "localhost");
    }

    // A certificate with another certificate's key, reloaded on request.
    identity.put(identity.files.cert, read_text(pki().renewed.cert));
    identity.put(identity.files.key, read_text(pki().good.key));
    EXPECT_FALSE(server.server().reload_tls());
    text = log.text();
    EXPECT_NE(text.find(identity.files.key), std::string::npos) << text;
    EXPECT_NE(text.find("not the private key of the certificate"), std::string::npos) << text;
    {
        tls_probe probe(server.port());
        ASSERT_TRUE(probe.connected()) << probe.handshake_error().message();
        EXPECT_EQ(probe.certificate_cn(), "localhost");
    }

    // Fixed: the next reload takes it.
    identity.replace(pki().renewed);
    EXPECT_TRUE(server.server().reload_tls());
    tls_probe probe(server.port());
    ASSERT_TRUE(probe.connected()) << probe.handshake_error().message();
    EXPECT_EQ(probe.certificate_cn(), "renewed.localhost");
}

void expect_unusable(server_tls_options tls, tls_file which, const std::string& path,
                     std::string_view reason) {
    auto r = hello_router();
    testing::test_server_options o;
    o.server.tls = std::move(tls);
    try {
        testing::test_server server(r, o);
        ADD_FAILURE() << "started with an unusable " << to_string(which) << " " << path;
    } catch (const tls_file_error& e) {
        EXPECT_EQ(e.which(), which) << e.what();
        EXPECT_EQ(e.path(), path) << e.what();
        EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
        if (!path.empty()) {
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
        }
    }
    EXPECT_THROW(check_tls_files(o.server.tls), tls_file_error);
}

TEST(server_tls, unusable_files_at_start_are_errors_naming_the_file_and_why) {
    const auto missing = (pki().dir / "missing.pem").string();
    const auto& good = pki().good;
    expect_unusable({.certificate_file = missing, .private_key_file = good.key},
                    tls_file::certificate, missing, "No such file or directory");
    expect_unusable({.certificate_file = pki().dir.string(), .private_key_file = good.key},
                    tls_file::certificate, pki().dir.string(), "a directory");
    expect_unusable({.certificate_file = good.key, .private_key_file = good.key},
                    tls_file::certificate, good.key, "no PEM certificate in it");
    expect_unusable({.certificate_file = good.cert, .private_key_file = good.cert},
                    tls_file::private_key, good.cert, "no PEM private key in it");
    expect_unusable({.certificate_file = good.cert, .private_key_file = pki().renewed.key},
                    tls_file::private_key, pki().renewed.key,
                    "not the private key of the certificate in '" + good.cert + "'");
    expect_unusable(
        {.certificate_file = good.cert, .private_key_file = good.key, .client_ca_file = good.key},
        tls_file::client_ca, good.key, "no PEM certificate in it");
    expect_unusable({.private_key_file = good.key}, tls_file::certificate, "",
                    "required when a private key");
    expect_unusable({.certificate_file = good.cert}, tls_file::private_key, "", "required");
}

TEST(server_tls, the_settings_are_read_from_flags) {
    config::schema schema;
    add_server_tls_options(schema);
    std::vector<std::string_view> args = {"--tls-cert", "/c.pem",          "--tls-key",
                                          "/k.pem",     "--tls-client-ca", "/ca.pem"};
    auto values = config::load(schema, args, {});
    ASSERT_TRUE(values) << values.error().what();
    auto tls = read_server_tls(*values);
    EXPECT_EQ(tls.certificate_file, "/c.pem");
    EXPECT_EQ(tls.private_key_file, "/k.pem");
    EXPECT_EQ(tls.client_ca_file, "/ca.pem");
    auto defaults = config::load(schema, std::vector<std::string_view>{}, {});
    ASSERT_TRUE(defaults);
    EXPECT_FALSE(read_server_tls(*defaults).enabled());  // plain HTTP by default
}

TEST(server_tls, the_connection_caps_count_tls_connections) {
    auto r = hello_router();
    auto options = tls_options(pki().good);
    options.server.max_connections_per_client = 1;
    options.server.probe_connections = 0;
    testing::test_server server(r, options);
    {
        tls_probe first(server.port());
        ASSERT_TRUE(first.connected()) << first.handshake_error().message();
        ASSERT_NE(first.get("/hello").find("200 OK"), std::string::npos);
        tls_probe second(server.port());
        EXPECT_FALSE(second.connected()) << "a second connection from the address was served";
        EXPECT_NE(first.get("/hello").find("200 OK"), std::string::npos);
    }
    // The slot is free again once the first connection has gone.
    EXPECT_TRUE(eventually([&] {
        tls_probe next(server.port());
        return next.connected() && next.get("/hello").find("200 OK") != std::string::npos;
    }));
}

TEST(server_tls, graceful_shutdown_finishes_the_response_and_ends_with_close_notify) {
    auto r = hello_router();
    testing::test_server server(r, tls_options(pki().good));
    tls_probe probe(server.port());
    ASSERT_TRUE(probe.connected()) << probe.handshake_error().message();
    std::jthread stopper([&] {
        std::this_thread::sleep_for(150ms);  // /slow is being handled
        server.begin_stop();
    });
    auto res = probe.get("/slow");
    EXPECT_NE(res.find("200 OK"), std::string::npos) << res;
    EXPECT_NE(res.find("Connection: close"), std::string::npos) << res;
    EXPECT_TRUE(res.ends_with("slow")) << res;
    EXPECT_EQ(probe.read_until_closed(), asio::error::eof)
        << "the server closed without close_notify";
    server.wait_stopped();
}

}  // namespace
}  // namespace keel::http::client_test
