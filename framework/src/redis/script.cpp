#include <keel/framework/digest.hpp>
#include <keel/framework/redis/script.hpp>

namespace keel::redis {

script::script(std::string source) : source_(std::move(source)), sha1_(sha1_hex(source_)) {}

}  // namespace keel::redis
