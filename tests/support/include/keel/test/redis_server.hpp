#pragma once

// A real redis-server for a test: started on a unix socket (and optionally a TCP port) in
// its own temporary directory, stopped and removed at the end. It can be killed and
// restarted on the same data directory, with AOF on, to test reconnects and durability.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace keel::test {

struct redis_server_options {
    bool appendonly = false;
    std::string appendfsync = "always";   // with appendonly: always, everysec or no
    bool tcp = false;                     // also listen on a free loopback TCP port
    std::vector<std::string> extra_args;  // e.g. {"--requirepass", "secret"}
};

class redis_server {
  public:
    explicit redis_server(redis_server_options options = {});
    ~redis_server();
    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    // unix:///tmp/.../redis.sock
    std::string url() const;
    // redis://127.0.0.1:<port> (only with options.tcp)
    std::string tcp_url() const;
    const std::string& socket_path() const { return socket_; }
    const std::string& dir() const { return dir_; }
    std::uint16_t port() const { return port_; }
    bool running() const { return pid_ > 0; }

    void start();    // on the same directory and port; waits until it answers PING
    void stop();     // SIGTERM, waits for exit (AOF flushed)
    void kill();     // SIGKILL, waits for exit
    void restart();  // stop() then start()

    // Runs redis-cli against the server and returns its trimmed output.
    std::string cli(const std::vector<std::string>& args) const;

  private:
    void wait_ready();

    redis_server_options options_;
    std::string dir_;
    std::string socket_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

// A replica of `primary` (started with options.tcp), running and in sync when this returns:
// its link to the primary is up, so WAIT counts it. Throws std::runtime_error after 10 s.
std::unique_ptr<redis_server> start_replica(const redis_server& primary,
                                            redis_server_options options = {});

// Starts a program (argv[0] looked up in PATH) as a child that dies with this process, even
// on a crash or SIGKILL, so an aborted test never leaves a redis-server behind.
pid_t spawn(const std::vector<std::string>& args);

// Runs `fork` (which forks and sets PR_SET_PDEATHSIG in its child) on one thread that lives
// as long as the process, and returns what it returns. PR_SET_PDEATHSIG fires when the
// *thread* that forked exits, so a child forked on a helper thread would die with it.
pid_t fork_on_lasting_thread(std::function<pid_t()> fork);

// True when a server on this loopback TCP port answers PING within a second.
bool answers_ping(std::uint16_t port);

// Path of an executable in PATH, or empty.
std::string find_program(const std::string& name);

// A loopback TCP port that was free a moment ago; throws std::runtime_error when none is.
std::uint16_t free_port();

// Whether the redis-server that wrote the log at `log_path` stopped because a port it was
// given was taken: free_port()'s port is only free when it asks, and a test running beside
// may bind it before the server does. The harnesses then start the server on fresh ports.
bool lost_port_race(const std::string& log_path);
inline constexpr int port_attempts = 5;  // starts on fresh ports before a harness gives up

// Calls `start` until it returns; when it throws std::runtime_error because the server lost
// the race for its port (lost_port_race on the log `log_path()` names: that of the latest
// start, which may have moved with the ports), calls `take_fresh_ports` and starts again, at
// most port_attempts times in all. Any other failure is rethrown at once.
void start_despite_port_races(const std::function<void()>& start,
                              const std::function<std::string()>& log_path,
                              const std::function<void()>& take_fresh_ports);

// A new directory /tmp/<prefix>-XXXXXX (mkdtemp); throws std::runtime_error on failure.
std::string make_temp_dir(const std::string& prefix);

}  // namespace keel::test
