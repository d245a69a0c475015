#pragma once

// A service binary run as a child process for end-to-end tests and load drivers: started
// with the usual flags on a free loopback port, ready once /readyz answers 200, stopped
// with SIGTERM, killed with SIGKILL, restarted with the same flags. Its stdout and stderr go
// to a log file in a temporary directory, printed when the current test has failed.
// Polling helpers with deadlines replace fixed sleeps.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <keel/http/testing.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace keel::e2e {

using namespace std::chrono_literals;

struct service_options {
    std::string binary;
    std::string redis_url;  // empty: no --redis (a service without Redis)
    int threads = 2;
    std::string log_level = "warn";
    std::vector<std::string> extra_args;  // test-specific flags, e.g. {"--payment-timeout", "1s"}
    // NAME=value pairs added to the environment (the test's own KEEL_* variables are not
    // passed on, so that a developer's shell cannot change what a test runs).
    std::vector<std::string> extra_env;
    std::chrono::milliseconds ready_timeout = 15s;
    // How readiness is checked. Empty: GET /readyz over plain HTTP until it answers 200.
    // Set (a service over TLS): called until it returns true; `last` says what it saw.
    std::function<bool(std::uint16_t port, std::string& last)> ready;
};

class service_process {
  public:
    explicit service_process(service_options options);
    ~service_process();
    service_process(const service_process&) = delete;
    service_process& operator=(const service_process&) = delete;

    std::uint16_t port() const { return port_; }
    pid_t pid() const { return pid_; }
    bool running();

    // Starts the binary (same port and flags each time) and waits until /readyz is 200.
    void start();
    // SIGTERM, then waits for the exit (SIGKILL after `grace`). Returns the exit status as
    // waitpid reports it, or -1 when it was not running.
    int stop(std::chrono::milliseconds grace = 15s);
    void kill9();
    void restart();

    http::testing::test_client client(std::chrono::milliseconds timeout = 10s) const;

    const std::string& log_path() const { return log_path_; }
    std::string log() const;
    void print_log() const;

  private:
    void spawn();
    void wait_ready();

    service_options options_;
    std::vector<std::string> argv_;
    std::vector<std::string> env_;
    std::string dir_;
    std::string log_path_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

// A shell command's exit code (-1 when it did not exit normally) and standard output; the
// command redirects its standard error itself (`2>&1`, `2>file`) when a test needs it.
struct command_result {
    int code = -1;
    std::string out;
};
command_result run_command(const std::string& shell_command);

// A process's resident memory in KiB (VmRSS), or -1 when it cannot be read.
std::int64_t rss_kib(pid_t pid);

// A shell word: `s` in single quotes, safe whatever it holds.
std::string shell_quote(const std::string& s);

// Calls `done` every `interval` until it returns true or `timeout` passes; returns whether
// it did. Exceptions from `done` (a refused connection while a server restarts) count as
// false, the last one is kept in `last_error` when given.
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s,
                std::chrono::milliseconds interval = 10ms, std::string* last_error = nullptr);

// GETs `target` until the response is 200 and `accept` holds for its JSON body; returns
// that body, or nullopt on timeout with the last answer in `last`.
std::optional<nlohmann::json> poll_json(http::testing::test_client& client,
                                        const std::string& target,
                                        const std::function<bool(const nlohmann::json&)>& accept,
                                        std::chrono::milliseconds timeout = 10s,
                                        std::string* last = nullptr,
                                        std::chrono::milliseconds interval = 10ms);

}  // namespace keel::e2e
