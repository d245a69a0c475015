#pragma once

// What can go wrong in a keel command, and the exit code each maps to: 0 done, 1 the
// service refused or could not be reached, 2 the command line itself is wrong. Commands
// throw these; run_cli prints the message on stderr and exits with the code.

#include <stdexcept>
#include <string>
#include <string_view>

namespace keel::cli {

enum class exit_code : int { ok = 0, failed = 1, usage = 2 };

inline int to_int(exit_code c) {
    return static_cast<int>(c);
}

// Bad usage the option parser cannot see: conflicting options, invalid --payload JSON,
// an unusable --url.
class usage_error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// The service answered with a status other than 2xx; what() is the status and its problem.
class api_error : public std::runtime_error {
  public:
    api_error(int status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    int status() const { return status_; }

  private:
    int status_;
};

// No usable answer: the service cannot be reached, does not answer in time, or answers
// something that is not HTTP or not JSON.
class transport_error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// 2xx: ok; anything else (including 1xx and 3xx, which the API never sends): failed.
exit_code exit_code_for_status(int status);

// "409 Conflict: instance fulfil/o-17 is completed" from an application/problem+json body
// (its title, else the reason phrase, then its detail); for a body that is not a problem,
// the status and the body's first line, shortened.
std::string problem_message(int status, std::string_view body);

}  // namespace keel::cli
