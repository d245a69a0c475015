#pragma once

// Servers for the HTTP client's tests: certificates made at run time (a test CA and the
// certificates each TLS case needs, with OpenSSL's C API; the server's TLS tests and the
// end-to-end HTTPS case use them too), a small TLS server on Asio, and a scripted TCP server
// whose connections run a test's own code.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace keel::http::client_test {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// A certificate and its private key, as PEM files.
struct cert_files {
    std::string cert;
    std::string key;
};

// Made once per test process in a temporary directory (removed at exit).
struct test_pki {
    std::filesystem::path dir;
    std::string ca;          // the test CA's certificate: what the client trusts
    cert_files good;         // localhost and 127.0.0.1, from the CA
    cert_files renewed;      // the same names, from the CA, CN renewed.localhost: a new certificate
    cert_files wrong_host;   // other.example, from the CA
    cert_files expired;      // localhost, from the CA, expired yesterday
    cert_files self_signed;  // localhost, signed by itself
    cert_files unknown_ca;   // localhost, from a CA the client does not know
    cert_files client;       // a client certificate (CN keel-test-client), from the CA
    cert_files other_client;  // a client certificate from the unknown CA
};
const test_pki& pki();

// A TLS server on 127.0.0.1 answering every request on its own thread, keep-alive:
//   /redirect-to-http  302 to http://127.0.0.1:<plain_port>/hello
//   anything else      200 "tls ok" (+ " client=<CN>" when the client sent a certificate)
// With `client_ca`, it requires a client certificate issued by that CA.
class tls_server {
  public:
    explicit tls_server(const cert_files& identity, std::string client_ca = {},
                        std::uint16_t plain_port = 0);
    ~tls_server();
    std::uint16_t port() const { return port_; }
    int handshakes() const { return handshakes_.load(); }
    int requests() const { return requests_.load(); }

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
    std::uint16_t port_ = 0;
    std::atomic<int> handshakes_{0};
    std::atomic<int> requests_{0};
};

// A TCP server on 127.0.0.1 running `handle(socket, index)` on a thread of its own for
// every connection it accepts (index: 0, 1, ...), with blocking socket calls. The
// destructor shuts the sockets down (so blocked reads return) and joins the threads.
class scripted_server {
  public:
    using handler = std::function<void(tcp::socket&, int index)>;
    explicit scripted_server(handler handle);
    ~scripted_server();
    std::uint16_t port() const { return port_; }
    int accepted() const { return accepted_.load(); }
    bool stopping() const { return stopping_.load(); }

  private:
    void accept_loop();

    handler handle_;
    asio::io_context io_;
    tcp::acceptor acceptor_;
    std::uint16_t port_ = 0;
    std::atomic<int> accepted_{0};
    std::atomic<bool> stopping_{false};
    std::mutex mutex_;
    std::vector<std::shared_ptr<tcp::socket>> sockets_;
    std::vector<std::thread> threads_;
    std::thread acceptor_thread_;
};

// Blocking helpers for scripted handlers.
// Reads one request (header, then a Content-Length body); empty when the peer closed.
std::string read_request(tcp::socket& socket, std::string& buffer);
void write_all(tcp::socket& socket, std::string_view bytes);

}  // namespace keel::http::client_test
