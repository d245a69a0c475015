#pragma once

/// @file
/// A Lua script run with EVALSHA. Its SHA1 is computed once, locally. A connection loads its
/// registered scripts on every (re)connect and, should Redis answer NOSCRIPT anyway (after
/// SCRIPT FLUSH or a failover), resends the request once as EVAL with the full source.

#include <string>
#include <string_view>

namespace keel::redis {

/// A Lua script run with EVALSHA; see the file's description.
class script {
  public:
    /// The script `source`; its SHA1 is computed here.
    explicit script(std::string source);
    /// The Lua source.
    const std::string& source() const { return source_; }
    /// The SHA1 of the source, lower-case hex.
    const std::string& sha1() const { return sha1_; }

  private:
    std::string source_;
    std::string sha1_;
};

}  // namespace keel::redis
