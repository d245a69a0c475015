// The child-process side of the end-to-end tests: fork/exec of the service binary with its
// output in a log file, readiness by polling /readyz (or a test's own check), SIGTERM and
// SIGKILL, and the polling helpers. The child dies with the test (PR_SET_PDEATHSIG), so an
// aborted test leaves no service behind, and it does not inherit the caller's KEEL_*
// variables.

#include "service_process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <keel/test/redis_server.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace keel::e2e {

namespace {

std::string describe_exit(int status) {
    if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "ended (status " + std::to_string(status) + ")";
}

}  // namespace

service_process::service_process(service_options options) : options_(std::move(options)) {
    if (options_.binary.empty() || ::access(options_.binary.c_str(), X_OK) != 0)
        throw std::runtime_error("service binary not found or not executable: " + options_.binary);
    dir_ = keel::test::make_temp_dir("keel-e2e");
    log_path_ = dir_ + "/service.log";
    for (char** e = environ; *e; ++e) {
        std::string_view var(*e);
        if (!var.starts_with("KEEL_")) env_.emplace_back(var);
    }
    env_.insert(env_.end(), options_.extra_env.begin(), options_.extra_env.end());
    // A port picked here can be taken by someone else before the child binds it (tests run
    // in parallel under ctest -j): a child that exits before it is ready gets a new port.
    for (int attempt = 1;; ++attempt) {
        port_ = keel::test::free_port();
        try {
            start();
            return;
        } catch (const std::exception&) {
            if (attempt == 3 || running()) {
                stop(2s);
                print_log();
                std::error_code ec;
                std::filesystem::remove_all(dir_, ec);
                throw;
            }
        }
    }
}

service_process::~service_process() {
    try {
        stop();
    } catch (...) {
    }
    if (::testing::Test::HasFailure()) print_log();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

bool service_process::running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        std::ofstream(log_path_, std::ios::app)
            << "[e2e] service " << describe_exit(status) << "\n";
        pid_ = -1;
        return false;
    }
    return true;
}

void service_process::spawn() {
    argv_ = {options_.binary, "--port", std::to_string(port_)};
    if (!options_.redis_url.empty()) argv_.insert(argv_.end(), {"--redis", options_.redis_url});
    argv_.insert(argv_.end(), {"--threads", std::to_string(options_.threads), "--log-level",
                               options_.log_level});
    argv_.insert(argv_.end(), options_.extra_args.begin(), options_.extra_args.end());

    // Everything the child needs is prepared before fork: after it, only exec-safe calls.
    std::vector<char*> argv;
    for (auto& a : argv_) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env_) envp.push_back(e.data());
    envp.push_back(nullptr);

    {
        std::ofstream note(log_path_, std::ios::app);
        note << "[e2e] starting:";
        for (const auto& a : argv_) note << ' ' << a;
        note << "\n";
    }
    int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) throw std::runtime_error("cannot open " + log_path_);
    int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = keel::test::fork_on_lasting_thread([&] {
        pid_t parent = ::getpid();
        pid_t child = ::fork();
        if (child == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(127);
            ::dup2(null_fd, STDIN_FILENO);
            ::dup2(log_fd, STDOUT_FILENO);
            ::dup2(log_fd, STDERR_FILENO);
            ::execve(argv[0], argv.data(), envp.data());
            ::_exit(127);
        }
        return child;
    });
    if (pid < 0) {
        ::close(log_fd);
        ::close(null_fd);
        throw std::runtime_error("fork failed");
    }
    ::close(log_fd);
    ::close(null_fd);
    pid_ = pid;
}

void service_process::start() {
    if (running()) return;
    spawn();
    wait_ready();
}

void service_process::wait_ready() {
    auto deadline = std::chrono::steady_clock::now() + options_.ready_timeout;
    std::string last = "no answer";
    while (std::chrono::steady_clock::now() < deadline) {
        if (!running())
            throw std::runtime_error("the service exited before it was ready; log: " + log_path_);
        if (options_.ready) {
            if (options_.ready(port_, last)) return;
            std::this_thread::sleep_for(20ms);
            continue;
        }
        try {
            auto c = client(1s);
            auto res = c.get("/readyz");
            if (res.status == http::status::ok) return;
            last = std::to_string(http::to_int(res.status)) + " " + res.body;
        } catch (const std::exception& e) {
            last = e.what();
        }
        std::this_thread::sleep_for(20ms);
    }
    throw std::runtime_error("the service was not ready within " +
                             std::to_string(options_.ready_timeout.count()) +
                             " ms; last /readyz: " + last);
}

int service_process::stop(std::chrono::milliseconds grace) {
    if (!running()) return -1;
    ::kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + grace;
    int status = 0;
    for (;;) {
        if (::waitpid(pid_, &status, WNOHANG) == pid_) break;
        if (std::chrono::steady_clock::now() > deadline) {
            ADD_FAILURE() << "the service did not stop within " << grace.count()
                          << " ms of SIGTERM; killing it";
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
            break;
        }
        std::this_thread::sleep_for(5ms);
    }
    std::ofstream(log_path_, std::ios::app) << "[e2e] service " << describe_exit(status) << "\n";
    pid_ = -1;
    return status;
}

void service_process::kill9() {
    if (!running()) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    std::ofstream(log_path_, std::ios::app) << "[e2e] service " << describe_exit(status) << "\n";
    pid_ = -1;
}

void service_process::restart() {
    stop();
    start();
}

http::testing::test_client service_process::client(std::chrono::milliseconds timeout) const {
    return http::testing::test_client("127.0.0.1", port_, timeout);
}

std::string service_process::log() const {
    std::ifstream in(log_path_);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

void service_process::print_log() const {
    constexpr std::size_t tail = 64 * 1024;
    auto text = log();
    std::cerr << "----- " << log_path_ << " -----\n";
    if (text.size() > tail) {
        std::cerr << "[... " << text.size() - tail << " bytes skipped ...]\n";
        text.erase(0, text.size() - tail);
    }
    std::cerr << text << "----- end of service log -----\n";
}

command_result run_command(const std::string& shell_command) {
    command_result r;
    FILE* pipe = popen(shell_command.c_str(), "r");
    if (!pipe) throw std::runtime_error("popen failed for: " + shell_command);
    char buf[4096];
    while (auto n = fread(buf, 1, sizeof buf, pipe)) r.out.append(buf, n);
    int status = pclose(pipe);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval, std::string* last_error) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        try {
            if (done()) return true;
        } catch (const std::exception& e) {
            if (last_error) *last_error = e.what();
        }
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(interval);
    }
}

std::optional<nlohmann::json> poll_json(http::testing::test_client& client,
                                        const std::string& target,
                                        const std::function<bool(const nlohmann::json&)>& accept,
                                        std::chrono::milliseconds timeout, std::string* last,
                                        std::chrono::milliseconds interval) {
    std::optional<nlohmann::json> found;
    std::string seen = "no answer";
    eventually(
        [&] {
            auto res = client.get(target);
            seen = std::to_string(http::to_int(res.status)) + " " + res.body;
            if (res.status != http::status::ok) return false;
            auto body = nlohmann::json::parse(res.body, nullptr, false);
            if (body.is_discarded() || !accept(body)) return false;
            found = std::move(body);
            return true;
        },
        timeout, interval, &seen);
    if (last) *last = "GET " + target + " -> " + seen;
    return found;
}

std::int64_t rss_kib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6));
    return -1;
}

}  // namespace keel::e2e
