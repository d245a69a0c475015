#include <openssl/sha.h>

#include <keel/framework/redis/script.hpp>

namespace keel::redis {

script::script(std::string source) : source_(std::move(source)) {
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(source_.data()), source_.size(), digest);
    static constexpr char hex[] = "0123456789abcdef";
    sha1_.reserve(2 * SHA_DIGEST_LENGTH);
    for (unsigned char byte : digest) {
        sha1_ += hex[byte >> 4];
        sha1_ += hex[byte & 0xf];
    }
}

}  // namespace keel::redis
