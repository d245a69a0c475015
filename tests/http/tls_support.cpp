#include "tls_support.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <stdexcept>

namespace keel::http::client_test {

namespace ssl = boost::asio::ssl;

namespace {

struct key_deleter {
    void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct cert_deleter {
    void operator()(X509* x) const { X509_free(x); }
};
using key_ptr = std::unique_ptr<EVP_PKEY, key_deleter>;
using cert_ptr = std::unique_ptr<X509, cert_deleter>;

void check(int ok, const char* what) {
    if (ok != 1) throw std::runtime_error(std::string("test PKI: ") + what + " failed");
}

key_ptr make_key() {
    key_ptr k(EVP_EC_gen("P-256"));
    if (!k) throw std::runtime_error("test PKI: EC key generation failed");
    return k;
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    if (!ext) throw std::runtime_error(std::string("test PKI: extension ") + value);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
}

struct cert_spec {
    std::string cn;
    bool ca = false;
    std::string san;  // "DNS:localhost,IP:127.0.0.1"
    long not_before = -3600;
    long not_after = 30L * 24 * 3600;
};

// `issuer`/`issuer_key` null: self-signed.
cert_ptr make_cert(EVP_PKEY* key, const cert_spec& spec, X509* issuer, EVP_PKEY* issuer_key) {
    static long serial = 1000;
    cert_ptr x(X509_new());
    check(X509_set_version(x.get(), 2), "X509_set_version");
    ASN1_INTEGER_set(X509_get_serialNumber(x.get()), ++serial);
    X509_gmtime_adj(X509_getm_notBefore(x.get()), spec.not_before);
    X509_gmtime_adj(X509_getm_notAfter(x.get()), spec.not_after);
    check(X509_set_pubkey(x.get(), key), "X509_set_pubkey");
    X509_NAME* name = X509_get_subject_name(x.get());
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("Keel tests"), -1, -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(spec.cn.c_str()), -1, -1, 0);
    check(X509_set_issuer_name(x.get(), issuer ? X509_get_subject_name(issuer) : name),
          "X509_set_issuer_name");
    X509* signer = issuer ? issuer : x.get();
    add_ext(x.get(), signer, NID_subject_key_identifier, "hash");
    if (issuer) add_ext(x.get(), signer, NID_authority_key_identifier, "keyid:always");
    if (spec.ca) {
        add_ext(x.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_ext(x.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(x.get(), signer, NID_key_usage, "critical,digitalSignature");
        add_ext(x.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
        if (!spec.san.empty()) add_ext(x.get(), signer, NID_subject_alt_name, spec.san.c_str());
    }
    if (X509_sign(x.get(), issuer_key ? issuer_key : key, EVP_sha256()) <= 0)
        throw std::runtime_error("test PKI: X509_sign failed");
    return x;
}

void write_cert(const std::filesystem::path& path, X509* cert) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("test PKI: cannot write " + path.string());
    PEM_write_X509(f, cert);
    std::fclose(f);
}

void write_key(const std::filesystem::path& path, EVP_PKEY* key) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("test PKI: cannot write " + path.string());
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
}

cert_files issue(const std::filesystem::path& dir, const std::string& name, const cert_spec& spec,
                 X509* issuer, EVP_PKEY* issuer_key) {
    auto key = make_key();
    auto cert = make_cert(key.get(), spec, issuer, issuer_key);
    cert_files out{(dir / (name + ".pem")).string(), (dir / (name + ".key")).string()};
    write_cert(out.cert, cert.get());
    write_key(out.key, key.get());
    return out;
}

test_pki make_pki() {
    test_pki p;
    std::string pattern =
        (std::filesystem::temp_directory_path() / "keel-client-tls-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("test PKI: mkdtemp failed");
    p.dir = pattern;

    auto ca_key = make_key();
    auto ca = make_cert(ca_key.get(), {.cn = "Keel test CA", .ca = true}, nullptr, nullptr);
    p.ca = (p.dir / "ca.pem").string();
    write_cert(p.ca, ca.get());
    auto other_key = make_key();
    auto other_ca =
        make_cert(other_key.get(), {.cn = "Unknown test CA", .ca = true}, nullptr, nullptr);

    const std::string local = "DNS:localhost,IP:127.0.0.1";
    p.good = issue(p.dir, "good", {.cn = "localhost", .san = local}, ca.get(), ca_key.get());
    p.renewed =
        issue(p.dir, "renewed", {.cn = "renewed.localhost", .san = local}, ca.get(), ca_key.get());
    p.wrong_host = issue(p.dir, "wrong-host", {.cn = "other.example", .san = "DNS:other.example"},
                         ca.get(), ca_key.get());
    p.expired = issue(
        p.dir, "expired",
        {.cn = "localhost", .san = local, .not_before = -2L * 24 * 3600, .not_after = -24L * 3600},
        ca.get(), ca_key.get());
    p.self_signed =
        issue(p.dir, "self-signed", {.cn = "localhost", .san = local}, nullptr, nullptr);
    p.unknown_ca = issue(p.dir, "unknown-ca", {.cn = "localhost", .san = local}, other_ca.get(),
                         other_key.get());
    p.client = issue(p.dir, "client", {.cn = "keel-test-client"}, ca.get(), ca_key.get());
    p.other_client =
        issue(p.dir, "other-client", {.cn = "stranger"}, other_ca.get(), other_key.get());
    return p;
}

struct pki_holder {
    test_pki value = make_pki();
    ~pki_holder() {
        std::error_code ignored;
        std::filesystem::remove_all(value.dir, ignored);
    }
};

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string peer_name(SSL* ssl) {
    X509* peer = SSL_get1_peer_certificate(ssl);
    if (!peer) return {};
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
    X509_free(peer);
    return cn;
}

std::size_t content_length(const std::string& head) {
    auto at = head.find("Content-Length: ");
    if (at == std::string::npos) at = head.find("content-length: ");
    if (at == std::string::npos) return 0;
    return std::stoul(head.substr(at + 16));
}

}  // namespace

const test_pki& pki() {
    static pki_holder holder;
    return holder.value;
}

// ---------------------------------------------------------------------------------------

struct tls_server::impl {
    impl(tls_server& o, const cert_files& identity, const std::string& client_ca,
         std::uint16_t plain)
        : owner(o), context(ssl::context::tls_server), acceptor(io), plain_port(plain) {
        context.use_certificate_chain_file(identity.cert);
        context.use_private_key_file(identity.key, ssl::context::pem);
        if (!client_ca.empty()) {
            context.load_verify_file(client_ca);
            context.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
        }
        tcp::endpoint at(asio::ip::make_address("127.0.0.1"), 0);
        acceptor.open(at.protocol());
        acceptor.set_option(tcp::acceptor::reuse_address(true));
        acceptor.bind(at);
        acceptor.listen();
        asio::co_spawn(io, accept_loop(), asio::detached);
        runner = std::thread([this] { io.run(); });
    }

    asio::awaitable<void> accept_loop() {
        while (true) {
            auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
            if (ec) co_return;
            asio::co_spawn(io, session(std::move(socket)), asio::detached);
        }
    }

    asio::awaitable<void> session(tcp::socket socket) {
        ssl::stream<tcp::socket> stream(std::move(socket), context);
        auto [hec] = co_await stream.async_handshake(ssl::stream_base::server, use_tuple);
        if (hec) co_return;
        ++owner.handshakes_;
        std::string client = peer_name(stream.native_handle());
        std::string buffer;
        while (true) {
            auto [ec, n] = co_await asio::async_read_until(stream, asio::dynamic_buffer(buffer),
                                                           "\r\n\r\n", use_tuple);
            if (ec) co_return;
            std::string head = buffer.substr(0, n);
            auto length = content_length(head);
            if (buffer.size() < n + length) {
                auto [bec, m] = co_await asio::async_read(
                    stream, asio::dynamic_buffer(buffer),
                    asio::transfer_exactly(n + length - buffer.size()), use_tuple);
                if (bec) co_return;
            }
            buffer.erase(0, n + length);
            ++owner.requests_;
            std::string response;
            if (head.starts_with("GET /redirect-to-http ")) {
                response = "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:" +
                           std::to_string(plain_port) + "/hello\r\nContent-Length: 0\r\n\r\n";
            } else {
                std::string body = "tls ok";
                if (!client.empty()) body += " client=" + client;
                response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
            }
            auto [wec, w] = co_await asio::async_write(stream, asio::buffer(response), use_tuple);
            if (wec) co_return;
        }
    }

    tls_server& owner;
    ssl::context context;  // outlives the io_context, whose destruction frees the sessions
    asio::io_context io;
    tcp::acceptor acceptor;
    std::uint16_t plain_port;
    std::thread runner;
};

tls_server::tls_server(const cert_files& identity, std::string client_ca, std::uint16_t plain_port)
    : impl_(std::make_unique<impl>(*this, identity, client_ca, plain_port)) {
    port_ = impl_->acceptor.local_endpoint().port();
}

tls_server::~tls_server() {
    impl_->io.stop();
    impl_->runner.join();
}

// ---------------------------------------------------------------------------------------

scripted_server::scripted_server(handler handle) : handle_(std::move(handle)), acceptor_(io_) {
    tcp::endpoint at(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(at.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(at);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    acceptor_thread_ = std::thread([this] { accept_loop(); });
}

void scripted_server::accept_loop() {
    while (!stopping_) {
        auto socket = std::make_shared<tcp::socket>(io_);
        boost::system::error_code ec;
        acceptor_.accept(*socket, ec);
        if (ec || stopping_) return;
        int index = accepted_++;
        std::lock_guard lock(mutex_);
        sockets_.push_back(socket);
        threads_.emplace_back([this, socket, index] {
            try {
                handle_(*socket, index);
            } catch (const std::exception&) {
                // The client went away: nothing to report from a scripted peer.
            }
        });
    }
}

scripted_server::~scripted_server() {
    stopping_ = true;
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    acceptor_thread_.join();
    std::lock_guard lock(mutex_);
    for (auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
    for (auto& t : threads_) t.join();
}

std::string read_request(tcp::socket& socket, std::string& buffer) {
    boost::system::error_code ec;
    auto n = asio::read_until(socket, asio::dynamic_buffer(buffer), "\r\n\r\n", ec);
    if (ec) return {};
    std::string head = buffer.substr(0, n);
    auto length = content_length(head);
    if (buffer.size() < n + length) {
        asio::read(socket, asio::dynamic_buffer(buffer),
                   asio::transfer_exactly(n + length - buffer.size()), ec);
        if (ec) return {};
    }
    std::string request = buffer.substr(0, n + length);
    buffer.erase(0, n + length);
    return request;
}

void write_all(tcp::socket& socket, std::string_view bytes) {
    asio::write(socket, asio::buffer(bytes.data(), bytes.size()));
}

}  // namespace keel::http::client_test
