#pragma once

// The server's TLS context, reloadable: each new connection takes the current one, and a
// reload swaps in a new context built from the files, or keeps the old one when they do not
// load. Private to the server (Asio's SSL stays out of the public headers).

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <keel/framework/log.hpp>
#include <keel/http/server.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace keel::http::detail {

namespace ssl = boost::asio::ssl;

// A server context from the files: TLS 1.2 at least, no renegotiation, the client
// certificate required and verified when `client_ca_file` is set. Throws tls_file_error
// naming the file that cannot be used and why.
std::shared_ptr<ssl::context> make_server_context(const server_tls_options& tls);

// One line about the certificate a context serves: subject, serial, expiry.
std::string describe_certificate(ssl::context& context);

class tls_identity {
  public:
    // Loads the files (throws tls_file_error).
    tls_identity(server_tls_options options, log::logger log);

    // The context new connections use. Any thread.
    std::shared_ptr<ssl::context> current() const;
    // Loads the files again and swaps the context in. On failure the error is logged, the
    // current context stays, and false is returned. Any thread.
    bool reload(std::string_view why);
    // Reloads when a file's modification time, size or inode changed since the last load
    // (attempted: a bad file is reported once, not at every check).
    void reload_if_changed();

    const server_tls_options& options() const { return options_; }

  private:
    struct stamp {
        bool exists = false;
        std::int64_t mtime_ns = 0;
        std::int64_t size = 0;
        std::uint64_t inode = 0;
        bool operator==(const stamp&) const = default;
    };
    std::vector<stamp> stamps() const;

    server_tls_options options_;
    log::logger log_;
    std::mutex reload_mutex_;   // one reload at a time (SIGHUP, the file check, a caller)
    mutable std::mutex mutex_;  // guards context_: taken once per new connection
    std::shared_ptr<ssl::context> context_;
    std::vector<stamp> loaded_;  // the files as last loaded (or attempted); reload_mutex_
};

}  // namespace keel::http::detail
