// The server's TLS context: the certificate, its chain and key, and the client CA for mutual
// TLS, read with OpenSSL's C API so that every unusable file is named with its reason; and
// the reload that swaps a new context in, or keeps the old one.

#include "server_tls.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace keel::http {

std::string_view to_string(tls_file which) {
    switch (which) {
        case tls_file::certificate:
            return "certificate";
        case tls_file::private_key:
            return "private key";
        case tls_file::client_ca:
            return "client CA";
    }
    return "file";
}

tls_file_error::tls_file_error(tls_file which, std::string path, std::string reason)
    : std::runtime_error("TLS " + std::string(to_string(which)) + " file " +
                         (path.empty() ? std::string("(not set)") : "'" + path + "'") + ": " +
                         reason),
      which_(which),
      path_(std::move(path)),
      reason_(std::move(reason)) {}

void check_tls_files(const server_tls_options& tls) {
    if (tls.enabled()) (void)detail::make_server_context(tls);
}

namespace detail {

namespace {

struct bio_free {
    void operator()(BIO* b) const { BIO_free(b); }
};
struct x509_free {
    void operator()(X509* x) const { X509_free(x); }
};
struct pkey_free {
    void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using bio_ptr = std::unique_ptr<BIO, bio_free>;
using x509_ptr = std::unique_ptr<X509, x509_free>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;

// OpenSSL's reason for the last failure, and the queue cleared.
std::string openssl_reason() {
    const char* text = ERR_reason_error_string(ERR_peek_last_error());
    std::string reason = text ? text : "unknown OpenSSL error";
    ERR_clear_error();
    return reason;
}

// The whole file, or tls_file_error saying why it cannot be read.
std::string read_file(tls_file which, const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw tls_file_error(which, path, "a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw tls_file_error(which, path, std::string("cannot read: ") + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw tls_file_error(which, path, "cannot read");
    return std::move(text).str();
}

bio_ptr memory_bio(const std::string& text) {
    return bio_ptr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Never asks for a passphrase (OpenSSL's default would prompt on the terminal).
int no_passphrase(char*, int, int, void*) {
    return 0;
}

void use_certificate_chain(SSL_CTX* ctx, const std::string& path) {
    auto text = read_file(tls_file::certificate, path);
    auto bio = memory_bio(text);
    x509_ptr leaf(PEM_read_bio_X509_AUX(bio.get(), nullptr, no_passphrase, nullptr));
    if (!leaf) {
        ERR_clear_error();
        throw tls_file_error(tls_file::certificate, path, "no PEM certificate in it");
    }
    if (SSL_CTX_use_certificate(ctx, leaf.get()) != 1)
        throw tls_file_error(tls_file::certificate, path, openssl_reason());
    SSL_CTX_clear_chain_certs(ctx);
    while (X509* issuer = PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr)) {
        if (SSL_CTX_add0_chain_cert(ctx, issuer) != 1) {
            X509_free(issuer);
            throw tls_file_error(tls_file::certificate, path, openssl_reason());
        }
    }
    ERR_clear_error();  // the end of the file is reported as an error
}

void use_private_key(SSL_CTX* ctx, const std::string& path, const std::string& certificate) {
    auto text = read_file(tls_file::private_key, path);
    auto bio = memory_bio(text);
    pkey_ptr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
    if (!key) {
        ERR_clear_error();
        bool encrypted = text.find("ENCRYPTED") != std::string::npos;
        throw tls_file_error(tls_file::private_key, path,
                             encrypted ? "an encrypted private key (give it without a passphrase)"
                                       : "no PEM private key in it");
    }
    auto mismatch = "not the private key of the certificate in '" + certificate + "'";
    if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1) {
        auto reason = openssl_reason();  // "key values mismatch", "key type mismatch", ...
        throw tls_file_error(tls_file::private_key, path,
                             reason.find("mismatch") != std::string::npos ? mismatch : reason);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        throw tls_file_error(tls_file::private_key, path, mismatch);
    }
}

void require_client_certificates(SSL_CTX* ctx, const std::string& path) {
    auto text = read_file(tls_file::client_ca, path);
    auto bio = memory_bio(text);
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    int count = 0;
    while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr)) {
        x509_ptr owned(ca);
        if (X509_STORE_add_cert(store, ca) != 1 || SSL_CTX_add_client_CA(ctx, ca) != 1)
            throw tls_file_error(tls_file::client_ca, path, openssl_reason());
        ++count;
    }
    ERR_clear_error();
    if (count == 0) throw tls_file_error(tls_file::client_ca, path, "no PEM certificate in it");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
}

std::string asn1_time_text(const ASN1_TIME* t) {
    bio_ptr out(BIO_new(BIO_s_mem()));
    ASN1_TIME_print(out.get(), t);
    char* data = nullptr;
    long n = BIO_get_mem_data(out.get(), &data);
    return std::string(data, static_cast<std::size_t>(n));
}

}  // namespace

std::shared_ptr<ssl::context> make_server_context(const server_tls_options& tls) {
    if (tls.certificate_file.empty())
        throw tls_file_error(tls_file::certificate, "",
                             "required when a private key or a client CA is given");
    if (tls.private_key_file.empty())
        throw tls_file_error(tls_file::private_key, "", "required with the certificate");
    auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
    SSL_CTX* ctx = context->native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(
        ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    // An idle connection's read and write buffers are freed until it is used again.
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    // Needed for session resumption when client certificates are verified.
    static constexpr unsigned char session_context[] = "keel-http";
    SSL_CTX_set_session_id_context(ctx, session_context, sizeof session_context - 1);
    use_certificate_chain(ctx, tls.certificate_file);
    use_private_key(ctx, tls.private_key_file, tls.certificate_file);
    if (!tls.client_ca_file.empty()) require_client_certificates(ctx, tls.client_ca_file);
    return context;
}

std::string describe_certificate(ssl::context& context) {
    X509* cert = SSL_CTX_get0_certificate(context.native_handle());
    if (!cert) return "no certificate";
    char subject[512] = {};
    X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
    std::string serial;
    if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr)) {
        char* hex = BN_bn2hex(bn);
        serial = hex ? hex : "";
        OPENSSL_free(hex);
        BN_free(bn);
    }
    return std::string(subject) + ", serial " + serial + ", valid until " +
           asn1_time_text(X509_get0_notAfter(cert));
}

tls_identity::tls_identity(server_tls_options options, log::logger log)
    : options_(std::move(options)), log_(std::move(log)) {
    loaded_ = stamps();
    context_ = make_server_context(options_);
    log_.info("TLS certificate from {}: {}", options_.certificate_file,
              describe_certificate(*context_));
}

std::shared_ptr<ssl::context> tls_identity::current() const {
    std::lock_guard lock(mutex_);
    return context_;
}

bool tls_identity::reload(std::string_view why) {
    std::lock_guard reloading(reload_mutex_);
    loaded_ = stamps();
    try {
        auto fresh = make_server_context(options_);
        auto described = describe_certificate(*fresh);
        {
            std::lock_guard lock(mutex_);
            context_ = std::move(fresh);
        }
        log_.info("TLS certificate reloaded ({}) from {}: {}", why, options_.certificate_file,
                  described);
        return true;
    } catch (const tls_file_error& e) {
        log_.error("TLS reload ({}) failed, still serving the previous certificate: {}", why,
                   e.what());
        return false;
    }
}

void tls_identity::reload_if_changed() {
    {
        std::lock_guard reloading(reload_mutex_);
        if (stamps() == loaded_) return;
    }
    reload("a file changed");
}

std::vector<tls_identity::stamp> tls_identity::stamps() const {
    std::vector<stamp> out;
    for (const auto* path :
         {&options_.certificate_file, &options_.private_key_file, &options_.client_ca_file}) {
        stamp s;
        struct stat st {};
        if (!path->empty() && ::stat(path->c_str(), &st) == 0) {
            s.exists = true;
            s.mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
            s.size = st.st_size;
            s.inode = st.st_ino;
        }
        out.push_back(s);
    }
    return out;
}

}  // namespace detail
}  // namespace keel::http
