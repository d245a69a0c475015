// The test harness's own guard against a port taken between free_port() and the server's
// bind (tests/support): a real redis-server given a port that is in use stops, and
// lost_port_race() recognises why from its log; a server that stops for another reason is
// not taken for one.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <keel/test/redis_server.hpp>
#include <string>

namespace {

// A listening loopback socket: its port stays taken while it lives.
struct taken_port {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    std::uint16_t port = 0;
    taken_port() {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            ::listen(fd, 1) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
            port = ntohs(addr.sin_port);
    }
    ~taken_port() { ::close(fd); }
};

// Runs redis-server with `args` until it exits (it is expected to stop at start).
std::string log_of_failed_start(const std::string& dir, std::vector<std::string> args) {
    auto log = dir + "/redis.log";
    args.insert(args.begin(), "redis-server");
    for (const auto& a : {"--dir", dir.c_str(), "--logfile", log.c_str(), "--save", ""})
        args.emplace_back(a);
    pid_t pid = keel::test::spawn(args);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    return log;
}

TEST(redis_harness, a_server_whose_port_is_taken_lost_a_port_race) {
    if (keel::test::find_program("redis-server").empty()) GTEST_SKIP() << "no redis-server";
    taken_port held;
    ASSERT_NE(held.port, 0);
    auto dir = keel::test::make_temp_dir("keel-harness");
    auto log =
        log_of_failed_start(dir, {"--port", std::to_string(held.port), "--bind", "127.0.0.1"});
    EXPECT_TRUE(keel::test::lost_port_race(log));

    // Stops at start for another reason: a port it may not have (the cluster bus port is the
    // port + 10000, above 65535).
    std::filesystem::create_directory(dir + "/other");
    auto other = log_of_failed_start(
        dir + "/other", {"--port", "60000", "--bind", "127.0.0.1", "--cluster-enabled", "yes"});
    EXPECT_FALSE(keel::test::lost_port_race(other));
    std::filesystem::remove_all(dir);
}

}  // namespace
