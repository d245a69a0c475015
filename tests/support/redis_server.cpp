#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <keel/test/redis_server.hpp>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace keel::test {
namespace {

// True when a connected socket's server answers PING within a second. Closes the socket.
bool answers_ping(int fd, const sockaddr* addr, socklen_t length) {
    bool ok = false;
    if (::connect(fd, addr, length) == 0) {
        const char ping[] = "*1\r\n$4\r\nPING\r\n";
        char buf[64] = {};
        timeval tv{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (::write(fd, ping, sizeof ping - 1) == sizeof ping - 1) {
            auto n = ::read(fd, buf, sizeof buf - 1);
            ok = n > 0 && std::string_view(buf, static_cast<std::size_t>(n)).starts_with("+PONG");
        }
    }
    ::close(fd);
    return ok;
}

// True when the server answers PING on its unix socket.
bool answers_ping(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    return answers_ping(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
}

}  // namespace

namespace {

pid_t fork_exec(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        ::execvp(argv[0], argv.data());
        ::_exit(127);
    }
    return pid;
}

// PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process (prctl(2)):
// a server a test restarted from a helper thread was killed when that thread ended. So every
// fork happens on one thread that lives as long as the process (never destroyed, never
// joined: it ends with the process, and the servers with it).
class spawner {
  public:
    static spawner& instance() {
        static auto* one = new spawner;
        return *one;
    }
    pid_t run(std::function<pid_t()> fork) {
        std::promise<pid_t> done;
        auto pid = done.get_future();
        {
            std::lock_guard lock(mutex_);
            jobs_.emplace_back(std::move(fork), std::move(done));
        }
        wake_.notify_one();
        return pid.get();
    }

  private:
    spawner() {
        std::thread([this] { serve(); }).detach();
    }
    void serve() {
        for (;;) {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return !jobs_.empty(); });
            auto [fork, done] = std::move(jobs_.front());
            jobs_.pop_front();
            lock.unlock();
            try {
                done.set_value(fork());
            } catch (...) {
                done.set_exception(std::current_exception());
            }
        }
    }
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::pair<std::function<pid_t()>, std::promise<pid_t>>> jobs_;
};

}  // namespace

pid_t fork_on_lasting_thread(std::function<pid_t()> fork) {
    return spawner::instance().run(std::move(fork));
}

pid_t spawn(const std::vector<std::string>& args) {
    return fork_on_lasting_thread([&] { return fork_exec(args); });
}

bool answers_ping(std::uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    return answers_ping(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
}

std::uint16_t free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        throw std::runtime_error("cannot find a free port");
    }
    ::close(fd);
    return ntohs(addr.sin_port);
}

std::string make_temp_dir(const std::string& prefix) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    return tmpl;
}

std::string find_program(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= dirs.size()) {
        auto end = dirs.find(':', start);
        auto dir = dirs.substr(start, end - start);
        auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return {};
}

bool lost_port_race(const std::string& log_path) {
    std::ifstream log(log_path);
    for (std::string line; std::getline(log, line);)
        if (line.find("Address already in use") != std::string::npos) return true;
    return false;
}

void start_despite_port_races(const std::function<void()>& start,
                              const std::function<std::string()>& log_path,
                              const std::function<void()>& take_fresh_ports) {
    for (int attempt = 1;; ++attempt) {
        try {
            start();
            return;
        } catch (const std::runtime_error&) {
            if (attempt == port_attempts || !lost_port_race(log_path())) throw;
        }
        take_fresh_ports();
    }
}

redis_server::redis_server(redis_server_options options) : options_(std::move(options)) {
    dir_ = make_temp_dir("keel-redis");
    socket_ = dir_ + "/redis.sock";
    if (!options_.tcp) {
        start();
        return;
    }
    port_ = free_port();
    auto log = dir_ + "/redis.log";
    start_despite_port_races([this] { start(); }, [&] { return log; },
                             [&] {
                                 std::filesystem::remove(log);
                                 port_ = free_port();
                             });
}

redis_server::~redis_server() {
    try {
        kill();
    } catch (...) {
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

std::string redis_server::url() const {
    return "unix://" + socket_;
}
std::string redis_server::tcp_url() const {
    return "redis://127.0.0.1:" + std::to_string(port_);
}

void redis_server::start() {
    if (pid_ > 0) return;
    std::vector<std::string> args{"redis-server",
                                  "--port",
                                  std::to_string(port_),
                                  "--bind",
                                  "127.0.0.1",
                                  "--unixsocket",
                                  socket_,
                                  "--unixsocketperm",
                                  "700",
                                  "--dir",
                                  dir_,
                                  "--save",
                                  "",
                                  "--enable-debug-command",
                                  "yes",
                                  "--daemonize",
                                  "no",
                                  "--logfile",
                                  dir_ + "/redis.log",
                                  "--appendonly",
                                  options_.appendonly ? "yes" : "no",
                                  "--appendfsync",
                                  options_.appendfsync};
    args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
    pid_ = spawn(args);
    wait_ready();
}

void redis_server::wait_ready() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    bool needs_auth = false;
    for (const auto& a : options_.extra_args) needs_auth |= a == "--requirepass";
    while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
                throw std::runtime_error("cannot run redis-server: is it installed and in PATH?");
            throw std::runtime_error("redis-server exited at start; see " + dir_ + "/redis.log");
        }
        if (needs_auth ? std::filesystem::exists(socket_) : answers_ping(socket_)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw std::runtime_error("redis-server did not answer within 10 s");
}

void redis_server::stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    std::filesystem::remove(socket_);
}

void redis_server::kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    std::error_code ec;
    std::filesystem::remove(socket_, ec);
}

void redis_server::restart() {
    stop();
    start();
}

std::string redis_server::cli(const std::vector<std::string>& args) const {
    std::string cmd = "redis-cli -s '" + socket_ + "'";
    for (const auto& a : args) cmd += " '" + a + "'";
    cmd += " 2>&1";
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
        std::array<char, 4096> buf;
        while (auto n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
        ::pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

std::unique_ptr<redis_server> start_replica(const redis_server& primary,
                                            redis_server_options options) {
    // A new replica's full sync otherwise waits 5 s for more replicas to share it.
    primary.cli({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
    options.extra_args.insert(options.extra_args.end(),
                              {"--replicaof", "127.0.0.1", std::to_string(primary.port())});
    auto replica = std::make_unique<redis_server>(std::move(options));
    for (int i = 0; i < 1000; ++i) {
        if (replica->cli({"INFO", "replication"}).find("master_link_status:up") !=
            std::string::npos)
            return replica;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("the replica did not synchronise with its primary within 10 s");
}

}  // namespace keel::test
