#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <keel/framework/digest.hpp>
#include <keel/http/middleware.hpp>
#include <stdexcept>

#include "uri.hpp"

namespace keel::http {

namespace {

using digest = std::array<unsigned char, 32>;

digest hmac_sha256(std::string_view secret, std::string_view body) {
    digest out{};
    unsigned int size = 0;
    auto* ok =
        HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
             reinterpret_cast<const unsigned char*>(body.data()), body.size(), out.data(), &size);
    if (!ok || size != out.size()) throw std::runtime_error("HMAC-SHA256 failed");
    return out;
}

}  // namespace

std::string sign(std::string_view secret, std::string_view body, std::string_view prefix) {
    auto mac = hmac_sha256(secret, body);
    return std::string(prefix) + to_hex(mac);
}

bool verify_signature(std::string_view secret, std::string_view body, std::string_view header_value,
                      std::string_view prefix) {
    if (!header_value.starts_with(prefix)) return false;
    auto hex = header_value.substr(prefix.size());
    if (hex.size() != 64) return false;
    digest given{};
    for (std::size_t i = 0; i < given.size(); ++i) {
        int hi = detail::hex_value(hex[2 * i]), lo = detail::hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        given[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    auto expected = hmac_sha256(secret, body);
    return CRYPTO_memcmp(given.data(), expected.data(), expected.size()) == 0;
}

bearer_check::bearer_check(std::string_view token) {
    if (token.empty()) throw std::invalid_argument("bearer_token: the token must not be empty");
    key_.resize(32);
    if (RAND_bytes(reinterpret_cast<unsigned char*>(key_.data()), static_cast<int>(key_.size())) !=
        1)
        throw std::runtime_error("bearer_token: no random bytes for the comparison key");
    auto mac = hmac_sha256(key_, token);
    expected_.assign(mac.begin(), mac.end());
}

bool bearer_check::operator()(std::string_view authorization) const {
    constexpr std::string_view scheme = "Bearer ";
    bool scheme_ok =
        authorization.size() > scheme.size() &&
        std::equal(scheme.begin(), scheme.end(), authorization.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
        });
    auto given = scheme_ok ? authorization.substr(scheme.size()) : std::string_view();
    auto mac = hmac_sha256(key_, given);
    return CRYPTO_memcmp(mac.data(), expected_.data(), mac.size()) == 0 && scheme_ok;
}

}  // namespace keel::http
