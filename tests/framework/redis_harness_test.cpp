// The test harness's own guard against a port taken between free_port() and the server's
// bind (tests/support): a real redis-server given a port that is in use stops, and
// lost_port_race() recognises why from its log; a server that stops for another reason is
// not taken for one. start_despite_port_races() starts such a server again on a fresh port,
// and only for that reason.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <keel/test/redis_server.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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

// A redis-server started on `port` in `dir`, its log at `log`: start() returns once the log
// says it is ready, or throws std::runtime_error once it has stopped (then `exit_status` is
// its waitpid status). (Not by PING: a connect to the taken port blocks once its listen
// backlog is full.) move() gives it a new directory and removes the old one, as the cluster
// harness does for a node it gives fresh ports.
struct server_on_port {
    std::string root = keel::test::make_temp_dir("keel-harness");
    std::string dir, log;
    int moves = 0;

    server_on_port() { move(); }
    void move() {
        if (!dir.empty()) std::filesystem::remove_all(dir);
        dir = root + "/" + std::to_string(moves++);
        std::filesystem::create_directory(dir);
        log = dir + "/redis.log";
    }
    std::vector<std::string> extra;
    std::uint16_t port = 0;
    pid_t pid = -1;
    int starts = 0;
    int exit_status = 0;

    void start() {
        ++starts;
        std::vector<std::string> args{"redis-server",
                                      "--port",
                                      std::to_string(port),
                                      "--bind",
                                      "127.0.0.1",
                                      "--dir",
                                      dir,
                                      "--logfile",
                                      log,
                                      "--save",
                                      ""};
        args.insert(args.end(), extra.begin(), extra.end());
        pid = keel::test::spawn(args);
        for (;;) {
            if (::waitpid(pid, &exit_status, WNOHANG) == pid) {
                pid = -1;
                throw std::runtime_error("redis-server stopped at start");
            }
            std::ifstream text(log);
            for (std::string line; std::getline(text, line);)
                if (line.find("Ready to accept connections") != std::string::npos) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    ~server_on_port() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
        std::filesystem::remove_all(root);
    }
};

// A port whose cluster bus port (the port + 10000) cannot be had, above Linux's default
// range of ephemeral ports (32768 to 60999): a connection of another test's client from that
// port makes Redis's bind fail first, and the start looks like a lost port race. Redis binds
// the port before it finds the bus port missing, so each test has one of its own: ctest runs
// them side by side.
constexpr std::uint16_t port_without_a_bus_port = 65000;
constexpr std::uint16_t another_port_without_a_bus_port = 65001;

// Each test has a port held by a listening socket and a server to start.
class redis_harness : public ::testing::Test {
  protected:
    void SetUp() override {
        if (keel::test::find_program("redis-server").empty()) GTEST_SKIP() << "no redis-server";
        ASSERT_NE(held_.port, 0);
    }
    static bool stopped_with_failure(const server_on_port& s) {
        return WIFEXITED(s.exit_status) && WEXITSTATUS(s.exit_status) != 0;
    }
    taken_port held_;
    server_on_port server_;
};

TEST_F(redis_harness, a_server_whose_port_is_taken_lost_a_port_race) {
    server_.port = held_.port;
    EXPECT_THROW(server_.start(), std::runtime_error);
    EXPECT_TRUE(stopped_with_failure(server_));
    EXPECT_TRUE(keel::test::lost_port_race(server_.log));

    // Stops at start for another reason: a port it may not have (the cluster bus port is the
    // port + 10000, above 65535).
    server_on_port other;
    other.port = another_port_without_a_bus_port;
    other.extra = {"--cluster-enabled", "yes"};
    EXPECT_THROW(other.start(), std::runtime_error);
    EXPECT_TRUE(stopped_with_failure(other));
    EXPECT_FALSE(keel::test::lost_port_race(other.log));
}

TEST_F(redis_harness, a_start_that_lost_its_port_is_made_again_on_a_fresh_one) {
    server_.port = held_.port;
    keel::test::start_despite_port_races([&] { server_.start(); }, [&] { return server_.log; },
                                         [&] {
                                             std::filesystem::remove(server_.log);
                                             server_.port = keel::test::free_port();
                                         });
    EXPECT_EQ(server_.starts, 2);
    EXPECT_NE(server_.port, held_.port);
    EXPECT_TRUE(keel::test::answers_ping(server_.port));
}

// Each retry moves the server to a new directory, as the cluster harness does: the race is
// read from the log of the latest start.
TEST_F(redis_harness, a_start_that_keeps_losing_its_port_gives_up) {
    server_.port = held_.port;
    EXPECT_THROW(
        keel::test::start_despite_port_races([&] { server_.start(); }, [&] { return server_.log; },
                                             [&] { server_.move(); }),
        std::runtime_error);
    EXPECT_EQ(server_.starts, keel::test::port_attempts);
}

TEST_F(redis_harness, a_start_that_fails_for_another_reason_is_not_made_again) {
    server_.port = port_without_a_bus_port;
    server_.extra = {"--cluster-enabled", "yes"};
    int fresh = 0;
    EXPECT_THROW(keel::test::start_despite_port_races(
                     [&] { server_.start(); }, [&] { return server_.log; }, [&] { ++fresh; }),
                 std::runtime_error);
    EXPECT_EQ(server_.starts, 1);
    EXPECT_EQ(fresh, 0);
}

}  // namespace
