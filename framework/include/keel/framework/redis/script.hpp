#pragma once

// A Lua script run with EVALSHA. Its SHA1 is computed once, locally. A connection loads its
// registered scripts on every (re)connect and, should Redis answer NOSCRIPT anyway (after
// SCRIPT FLUSH or a failover), resends the request once as EVAL with the full source.

#include <string>
#include <string_view>

namespace keel::redis {

class script {
  public:
    explicit script(std::string source);
    const std::string& source() const { return source_; }
    const std::string& sha1() const { return sha1_; }

  private:
    std::string source_;
    std::string sha1_;
};

}  // namespace keel::redis
