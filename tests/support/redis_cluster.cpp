#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <keel/framework/redis/slot.hpp>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace keel::test {
namespace {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string quote(const std::string& arg) {
    std::string out = "'";
    for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// Runs a shell command; its trimmed output and exit status.
std::pair<std::string, int> shell(const std::string& cmd) {
    std::string out;
    int status = -1;
    if (FILE* p = ::popen((cmd + " 2>&1").c_str(), "r")) {
        std::array<char, 4096> buf;
        while (auto n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
        status = ::pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return {out, status};
}

std::vector<std::string> words(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

std::vector<std::string> lines(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) {
        if (!l.empty() && l.back() == '\r') l.pop_back();
        if (!l.empty()) out.push_back(l);
    }
    return out;
}

// One line of CLUSTER NODES.
struct node_view {
    std::string id;
    std::uint16_t port = 0;
    std::string flags;
    std::string primary_id;  // of a replica
    std::vector<std::pair<int, int>> slots;

    bool is_primary() const { return flags.find("master") != std::string::npos; }
    bool failing() const {
        return flags.find("fail") != std::string::npos ||
               flags.find("handshake") != std::string::npos ||
               flags.find("noaddr") != std::string::npos;
    }
    bool serves(int slot) const {
        return std::any_of(slots.begin(), slots.end(),
                           [&](auto r) { return r.first <= slot && slot <= r.second; });
    }
};

std::vector<node_view> parse_nodes(const std::string& text) {
    std::vector<node_view> out;
    for (const auto& line : lines(text)) {
        auto w = words(line);
        if (w.size() < 8) continue;
        node_view v;
        v.id = w[0];
        auto addr = w[1].substr(0, w[1].find('@'));
        v.port = static_cast<std::uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
        v.flags = w[2];
        v.primary_id = w[3];
        for (std::size_t i = 8; i < w.size(); ++i) {
            if (w[i].starts_with('[')) continue;  // a slot migrating or importing
            auto dash = w[i].find('-');
            int first = std::stoi(w[i].substr(0, dash));
            int last = dash == std::string::npos ? first : std::stoi(w[i].substr(dash + 1));
            v.slots.emplace_back(first, last);
        }
        out.push_back(std::move(v));
    }
    return out;
}

// "port:first-last ..." of the primaries serving slots: what every node must agree on.
std::string slot_owners(const std::vector<node_view>& view) {
    std::map<int, std::string> owners;
    for (const auto& v : view) {
        if (!v.is_primary() || v.failing()) continue;
        for (auto [first, last] : v.slots)
            owners[first] =
                std::to_string(v.port) + ":" + std::to_string(first) + "-" + std::to_string(last);
    }
    std::string out;
    for (const auto& [_, o] : owners) out += o + " ";
    return out;
}

template <class Check>
void wait_until(Check check, std::chrono::milliseconds limit, const std::string& what) {
    auto deadline = steady::now() + limit;
    std::string last;
    while (!check(last)) {
        if (steady::now() > deadline)
            throw std::runtime_error("redis cluster: " + what + " not reached in time: " + last);
        std::this_thread::sleep_for(20ms);
    }
}

}  // namespace

redis_cluster::redis_cluster(redis_cluster_options options) : options_(options) {
    if (find_program("redis-server").empty() || find_program("redis-cli").empty())
        throw std::runtime_error("redis cluster: redis-server and redis-cli must be in PATH");
    dir_ = make_temp_dir("keel-cluster");
    std::set<std::uint16_t> taken;
    auto fresh_port = [&] {
        for (;;) {
            auto p = free_port();
            if (taken.insert(p).second) return p;
        }
    };
    auto place = [&](node& n) {
        n.port = fresh_port();
        n.bus_port = fresh_port();
        n.dir = dir_ + "/" + std::to_string(n.port);
        std::filesystem::create_directory(n.dir);
    };
    nodes_.resize(static_cast<std::size_t>(options_.primaries * (1 + options_.replicas)));
    for (auto& n : nodes_) place(n);
    for (auto& n : nodes_) launch(n);
    for (auto& n : nodes_)
        start_despite_port_races([&] { wait_ping(n); }, [&] { return n.dir + "/redis.log"; },
                                 [&] {
                                     std::filesystem::remove_all(n.dir);
                                     place(n);
                                     launch(n);
                                 });
    std::string cmd = "redis-cli --cluster create";
    for (const auto& n : nodes_) cmd += " 127.0.0.1:" + std::to_string(n.port);
    cmd += " --cluster-replicas " + std::to_string(options_.replicas) + " --cluster-yes";
    auto [out, status] = shell(cmd);
    if (status != 0) throw std::runtime_error("redis cluster: create failed: " + out);
    wait_healthy();
}

redis_cluster::~redis_cluster() {
    for (auto& n : nodes_) {
        if (n.pid <= 0) continue;
        ::kill(n.pid, SIGKILL);
        ::waitpid(n.pid, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

void redis_cluster::launch(node& n) {
    n.pid = spawn({"redis-server", "--port", std::to_string(n.port), "--cluster-port",
                   std::to_string(n.bus_port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                   "--cluster-config-file", n.dir + "/nodes.conf", "--cluster-node-timeout",
                   std::to_string(options_.node_timeout.count()),
                   // A replica fails over however long it was cut off; a restarted node syncs
                   // at once (no 5 s wait for other replicas to join the transfer).
                   "--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0",
                   "--dir", n.dir, "--save", "", "--appendonly", "no", "--enable-debug-command",
                   "yes", "--daemonize", "no", "--logfile", n.dir + "/redis.log"});
}

void redis_cluster::wait_ping(const node& n) const {
    auto deadline = steady::now() + 10s;
    while (!answers_ping(n.port)) {
        int status = 0;
        if (::waitpid(n.pid, &status, WNOHANG) == n.pid)
            throw std::runtime_error("redis cluster: redis-server exited at start; see " + n.dir +
                                     "/redis.log");
        if (steady::now() > deadline)
            throw std::runtime_error("redis cluster: a node did not answer within 10 s");
        std::this_thread::sleep_for(5ms);
    }
}

std::string redis_cluster::url() const {
    std::string out = "redis-cluster://";
    for (const auto& n : nodes_) {
        if (&n != &nodes_.front()) out += ',';
        out += "127.0.0.1:" + std::to_string(n.port);
    }
    return out;
}

std::vector<std::uint16_t> redis_cluster::ports() const {
    std::vector<std::uint16_t> out;
    for (const auto& n : nodes_) out.push_back(n.port);
    return out;
}

redis_cluster::node& redis_cluster::at(std::uint16_t port) {
    for (auto& n : nodes_)
        if (n.port == port) return n;
    throw std::invalid_argument("redis cluster: no node on port " + std::to_string(port));
}

const redis_cluster::node& redis_cluster::at(std::uint16_t port) const {
    return const_cast<redis_cluster*>(this)->at(port);
}

bool redis_cluster::running(std::uint16_t port) const {
    return at(port).pid > 0;
}

std::uint16_t redis_cluster::any_running() const {
    for (const auto& n : nodes_)
        if (n.pid > 0) return n.port;
    throw std::runtime_error("redis cluster: no node is running");
}

std::string redis_cluster::cli(std::uint16_t port, const std::vector<std::string>& args) const {
    std::string cmd = "redis-cli -h 127.0.0.1 -p " + std::to_string(port);
    for (const auto& a : args) cmd += " " + quote(a);
    return shell(cmd).first;
}

std::string redis_cluster::cluster_nodes() const {
    return cli(any_running(), {"CLUSTER", "NODES"});
}

std::vector<std::uint16_t> redis_cluster::primaries() const {
    std::vector<std::pair<int, std::uint16_t>> found;
    for (const auto& v : parse_nodes(cluster_nodes())) {
        if (v.is_primary() && !v.failing() && !v.slots.empty())
            found.emplace_back(v.slots.front().first, v.port);
    }
    std::sort(found.begin(), found.end());
    std::vector<std::uint16_t> out;
    for (auto [_, port] : found) out.push_back(port);
    return out;
}

std::uint16_t redis_cluster::primary_of(std::uint16_t slot) const {
    for (const auto& v : parse_nodes(cluster_nodes()))
        if (v.is_primary() && !v.failing() && v.serves(slot)) return v.port;
    throw std::runtime_error("redis cluster: no primary serves slot " + std::to_string(slot));
}

std::uint16_t redis_cluster::replica_of(std::uint16_t primary) const {
    auto view = parse_nodes(cluster_nodes());
    std::string id;
    for (const auto& v : view)
        if (v.port == primary) id = v.id;
    for (const auto& v : view)
        if (!v.is_primary() && v.primary_id == id) return v.port;
    throw std::runtime_error("redis cluster: no replica of " + std::to_string(primary));
}

std::vector<std::pair<std::uint16_t, std::uint16_t>> redis_cluster::slots_of(
    std::uint16_t primary) const {
    std::vector<std::pair<std::uint16_t, std::uint16_t>> out;
    for (const auto& v : parse_nodes(cli(primary, {"CLUSTER", "NODES"}))) {
        if (v.port != primary) continue;
        for (auto [first, last] : v.slots)
            out.emplace_back(static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(last));
    }
    return out;
}

std::string redis_cluster::node_id(std::uint16_t port) const {
    return cli(port, {"CLUSTER", "MYID"});
}

void redis_cluster::kill(std::uint16_t port) {
    auto& n = at(port);
    if (n.pid <= 0) return;
    ::kill(n.pid, SIGKILL);
    ::waitpid(n.pid, nullptr, 0);
    n.pid = -1;
}

void redis_cluster::start(std::uint16_t port) {
    auto& n = at(port);
    if (n.pid > 0) return;
    launch(n);
    wait_ping(n);
}

void redis_cluster::failover(std::uint16_t replica) {
    auto answer = cli(replica, {"CLUSTER", "FAILOVER"});
    if (answer != "OK") throw std::runtime_error("redis cluster: CLUSTER FAILOVER: " + answer);
    wait_until(
        [&](std::string& last) {
            last = cli(replica, {"ROLE"});
            return last.starts_with("master");
        },
        10s, "the replica's promotion");
    wait_healthy();
}

void redis_cluster::wait_healthy(std::chrono::milliseconds limit) const {
    wait_until(
        [&](std::string& last) {
            std::string agreed;
            for (const auto& n : nodes_) {
                if (n.pid <= 0) continue;
                auto info = cli(n.port, {"CLUSTER", "INFO"});
                if (info.find("cluster_state:ok") == std::string::npos) {
                    last = std::to_string(n.port) + " is not cluster_state:ok";
                    return false;
                }
                auto view = parse_nodes(cli(n.port, {"CLUSTER", "NODES"}));
                // Gossip reaches each node in its own time: a node that does not know all the
                // others yet answers CLUSTER SHARDS and SLOTS without them.
                for (const auto& m : nodes_) {
                    auto knows = [&](const node_view& v) { return v.port == m.port; };
                    if (m.pid > 0 && std::none_of(view.begin(), view.end(), knows)) {
                        last = std::to_string(n.port) + " does not know " + std::to_string(m.port) +
                               " yet";
                        return false;
                    }
                }
                for (const auto& v : view) {
                    if (v.failing() && running(v.port)) {
                        last = std::to_string(n.port) + " sees " + std::to_string(v.port) + " as " +
                               v.flags;
                        return false;
                    }
                }
                auto owners = slot_owners(view);
                if (!agreed.empty() && owners != agreed) {
                    last = "the nodes disagree on the slots: " + agreed + "/ " + owners;
                    return false;
                }
                agreed = owners;
                auto repl = cli(n.port, {"INFO", "replication"});
                if (repl.find("role:slave") != std::string::npos &&
                    repl.find("master_link_status:up") == std::string::npos) {
                    last = std::to_string(n.port) + " has not synced with its primary";
                    return false;
                }
            }
            return true;
        },
        limit, "a healthy cluster");
}

namespace {

// The number after `field` (e.g. "master_repl_offset:") in an INFO text; -1 when absent.
long long info_number(const std::string& info, const std::string& field) {
    auto at = info.find(field);
    if (at == std::string::npos) return -1;
    return std::strtoll(info.c_str() + at + field.size(), nullptr, 10);
}

}  // namespace

void redis_cluster::wait_replicated(std::chrono::milliseconds limit) const {
    std::vector<std::pair<std::uint16_t, long long>> targets;  // replica, offset to reach
    for (auto primary : primaries()) {
        auto offset = info_number(cli(primary, {"INFO", "replication"}), "master_repl_offset:");
        targets.emplace_back(replica_of(primary), offset);
    }
    wait_until(
        [&](std::string& last) {
            for (const auto& [replica, offset] : targets) {
                auto at = info_number(cli(replica, {"INFO", "replication"}), "slave_repl_offset:");
                if (at < offset) {
                    last = std::to_string(replica) + " is at offset " + std::to_string(at) +
                           " of " + std::to_string(offset);
                    return false;
                }
            }
            return true;
        },
        limit, "the replicas caught up");
}

void redis_cluster::begin_migration(std::uint16_t slot, std::uint16_t to) {
    auto from = primary_of(slot);
    auto s = std::to_string(slot);
    auto a = cli(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(from)});
    auto b = cli(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(to)});
    if (a != "OK" || b != "OK")
        throw std::runtime_error("redis cluster: SETSLOT IMPORTING/MIGRATING: " + a + " / " + b);
}

void redis_cluster::migrate_key(const std::string& key, std::uint16_t to) {
    auto from = primary_of(keel::redis::key_slot(key));
    auto answer =
        cli(from, {"MIGRATE", "127.0.0.1", std::to_string(to), "", "0", "5000", "KEYS", key});
    if (answer != "OK" && answer != "NOKEY")
        throw std::runtime_error("redis cluster: MIGRATE " + key + ": " + answer);
}

void redis_cluster::end_migration(std::uint16_t slot, std::uint16_t to) {
    auto from = primary_of(slot);
    auto s = std::to_string(slot);
    for (;;) {
        auto keys = lines(cli(from, {"CLUSTER", "GETKEYSINSLOT", s, "100"}));
        if (keys.empty()) break;
        std::vector<std::string> args{"MIGRATE", "127.0.0.1", std::to_string(to), "", "0",
                                      "5000",    "KEYS"};
        args.insert(args.end(), keys.begin(), keys.end());
        auto answer = cli(from, args);
        if (answer != "OK") throw std::runtime_error("redis cluster: MIGRATE: " + answer);
    }
    auto id = node_id(to);
    // The importing node first, then the one that gave it up, then everyone else.
    std::vector<std::uint16_t> order{to, from};
    for (const auto& n : nodes_)
        if (n.pid > 0 && n.port != to && n.port != from) order.push_back(n.port);
    for (auto port : order) {
        auto answer = cli(port, {"CLUSTER", "SETSLOT", s, "NODE", id});
        if (answer != "OK" && port != to && port != from) continue;  // a replica may refuse
        if (answer != "OK") throw std::runtime_error("redis cluster: SETSLOT NODE: " + answer);
    }
    wait_healthy();
}

void redis_cluster::move_slot(std::uint16_t slot, std::uint16_t to) {
    begin_migration(slot, to);
    end_migration(slot, to);
}

void redis_cluster::flush_all() {
    for (auto port : primaries()) cli(port, {"FLUSHALL"});
}

redis_cluster& shared_redis_cluster() {
    static redis_cluster cluster;
    return cluster;
}

redis::connection connect_to_empty_shared_cluster(boost::asio::io_context& io,
                                                  redis::connection_options options) {
    options.url = shared_redis_cluster().url();
    auto conn = redis::connection::create(io.get_executor(), std::move(options));
    if (!conn) throw std::runtime_error("cluster connection: " + conn.error().what());
    auto flushed = run(io, conn->exec("FLUSHALL"));
    if (!flushed) throw std::runtime_error("FLUSHALL: " + flushed.error().what());
    return std::move(*conn);
}

}  // namespace keel::test
