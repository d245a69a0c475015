// The measurements of the order-flow cost benchmark: /proc and getrusage CPU times, Redis's
// INFO counters and SLOWLOG, read on a probe connection of their own. See flow_measure.hpp.

#include "flow_measure.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace keel::bench {

namespace asio = boost::asio;

double process_stat_cpu_seconds(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto paren = text.rfind(')');
    if (paren == std::string::npos) throw std::runtime_error("cannot read /proc/<pid>/stat");
    // After "(comm)": field 3 (state) onwards; utime and stime are fields 14 and 15.
    std::istringstream fields(text.substr(paren + 2));
    std::vector<std::string> f;
    for (std::string s; fields >> s && f.size() < 13;) f.push_back(s);
    if (f.size() < 13) throw std::runtime_error("short /proc/<pid>/stat");
    double ticks = std::stod(f[11]) + std::stod(f[12]);
    return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double process_cpu_seconds(pid_t pid) {
    namespace fs = std::filesystem;
    double ns = 0;
    std::error_code ec;
    for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        std::ifstream in(task.path() / "schedstat");
        double run = 0;
        if (in >> run) ns += run;
    }
    if (ec || ns <= 0) return process_stat_cpu_seconds(pid);
    return ns / 1e9;
}

double self_cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
    return seconds(u.ru_utime) + seconds(u.ru_stime);
}

double redis_counters::calls() const {
    double n = 0;
    for (const auto& [_, s] : commands) n += s.calls;
    return n;
}

redis_counters operator-(const redis_counters& after, const redis_counters& before) {
    redis_counters d;
    d.cpu_seconds = after.cpu_seconds - before.cpu_seconds;
    d.stat_cpu_seconds = after.stat_cpu_seconds - before.stat_cpu_seconds;
    d.aof_bytes = after.aof_bytes - before.aof_bytes;
    d.aof_rewrites = after.aof_rewrites - before.aof_rewrites;
    d.net_in = after.net_in - before.net_in;
    d.net_out = after.net_out - before.net_out;
    d.reads = after.reads - before.reads;
    d.writes = after.writes - before.writes;
    for (const auto& [name, s] : after.commands) {
        command_stat b;
        if (auto it = before.commands.find(name); it != before.commands.end()) b = it->second;
        if (s.calls - b.calls > 0) d.commands[name] = {s.calls - b.calls, s.usec - b.usec};
    }
    return d;
}

double info_field(const std::string& info, const std::string& field) {
    auto at = info.find("\n" + field + ":");
    if (at == std::string::npos) return 0;
    return std::strtod(info.c_str() + at + field.size() + 2, nullptr);
}

namespace {

// "cmdstat_hset:calls=18,usec=40,usec_per_call=2.22,..." lines.
std::map<std::string, command_stat> parse_commandstats(const std::string& info) {
    std::map<std::string, command_stat> out;
    std::istringstream lines(info);
    for (std::string line; std::getline(lines, line);) {
        if (!line.starts_with("cmdstat_")) continue;
        auto colon = line.find(':');
        auto name = line.substr(8, colon - 8);
        if (name == "info" || name.starts_with("slowlog") || name.starts_with("config")) continue;
        auto field = [&](const std::string& key) {
            auto p = line.find("," + key + "=", colon);
            if (p == std::string::npos) p = line.find(":" + key + "=", colon);
            if (p == std::string::npos) return 0.0;
            return std::strtod(line.c_str() + p + key.size() + 2, nullptr);
        };
        out[name] = command_stat{field("calls"), field("usec")};
    }
    return out;
}

}  // namespace

redis_probe::redis_probe(const std::string& url) {
    redis::connection_options options;
    options.url = url;
    options.health_check_interval = std::chrono::milliseconds(0);
    options.request_timeout = std::chrono::milliseconds(60'000);
    options.client_name = "flow-probe";
    auto c = redis::connection::create(io_.get_executor(), options);
    if (!c) throw std::runtime_error("probe: " + c.error().what());
    connection_.emplace(std::move(*c));
    pid_ = static_cast<pid_t>(info_field(info("server"), "process_id"));
}

redis_probe::~redis_probe() {
    if (connection_) connection_->close();
}

redis::reply redis_probe::command(redis::command cmd) {
    std::optional<redis::result> out;
    asio::co_spawn(
        io_,
        [&]() -> asio::awaitable<void> { out = co_await connection_->execute(std::move(cmd)); },
        asio::detached);
    io_.restart();
    while (!out) io_.run_one();
    if (!*out) throw std::runtime_error("probe: " + out->error().what());
    return std::move(**out);
}

std::string redis_probe::info(const std::string& section) {
    auto r = command(redis::command("INFO", section));
    return "\n" + std::string(r.text().value_or(""));
}

redis_counters redis_probe::counters() {
    redis_counters c;
    c.commands = parse_commandstats(info("commandstats"));
    auto persistence = info("persistence");
    c.aof_bytes = info_field(persistence, "aof_current_size");
    c.aof_rewrites = info_field(persistence, "aof_rewrites");
    auto stats = info("stats");
    c.net_in = info_field(stats, "total_net_input_bytes");
    c.net_out = info_field(stats, "total_net_output_bytes");
    c.reads = info_field(stats, "total_reads_processed");
    c.writes = info_field(stats, "total_writes_processed");
    c.cpu_seconds = process_cpu_seconds(pid_);
    c.stat_cpu_seconds = process_stat_cpu_seconds(pid_);
    return c;
}

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// The per-thread sum and /proc/<pid>/stat agree within a few ticks unless a thread ended.
void check_agree(const char* what, double threads, double stat) {
    if (std::abs(threads - stat) > 0.03 + 0.05 * stat)
        std::fprintf(stderr,
                     "warning: %s CPU %.3f s from its threads' schedstat, %.3f s from "
                     "/proc/<pid>/stat: did a thread end?\n",
                     what, threads, stat);
}

}  // namespace

machine_ticks read_machine_ticks() {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    machine_ticks t;
    stat >> cpu;  // the first line sums every CPU: user nice system idle iowait irq softirq steal
    for (int field = 0; field < 8; ++field) {
        double ticks = 0;
        if (!(stat >> ticks)) break;
        t.total += ticks;
        if (field == 3 || field == 4) t.idle += ticks;
    }
    return t;
}

void phase_meter::start() {
    machine_ = read_machine_ticks();
    redis_ = probe_.counters();
    if (service_ > 0) {
        service_cpu_ = process_cpu_seconds(service_);
        service_stat_cpu_ = process_stat_cpu_seconds(service_);
    }
    driver_cpu_ = self_cpu_seconds();
    wall_ = now_seconds();
}

phase_cost phase_meter::stop() {
    phase_cost p;
    p.wall_seconds = now_seconds() - wall_;
    p.driver_cpu = self_cpu_seconds() - driver_cpu_;
    if (service_ > 0) {
        p.service_cpu = process_cpu_seconds(service_) - service_cpu_;
        check_agree("service", p.service_cpu,
                    process_stat_cpu_seconds(service_) - service_stat_cpu_);
    }
    p.redis = probe_.counters() - redis_;
    check_agree("redis-server", p.redis.cpu_seconds, p.redis.stat_cpu_seconds);
    auto machine = read_machine_ticks();
    if (machine.total > machine_.total)
        p.idle_share = (machine.idle - machine_.idle) / (machine.total - machine_.total);
    return p;
}

void start_slowlog(redis_probe& probe) {
    probe.command(redis::command("CONFIG", "SET", "slowlog-log-slower-than", "0"));
    probe.command(redis::command("CONFIG", "SET", "slowlog-max-len", "10000000"));
    probe.command(redis::command("SLOWLOG", "RESET"));
}

std::vector<slowlog_entry> read_slowlog(redis_probe& probe) {
    auto r = probe.command(redis::command("SLOWLOG", "GET", "-1"));
    std::vector<slowlog_entry> out;
    for (const auto& e : r.elements()) {
        auto f = e.elements();
        if (f.size() < 4) continue;
        slowlog_entry s;
        s.usec = static_cast<double>(f[2].integer().value_or(0));
        for (const auto& a : f[3].elements()) s.args.emplace_back(a.text().value_or(""));
        s.in_script = f.size() > 4 && f[4].text() == "?:0";
        out.push_back(std::move(s));
    }
    std::reverse(out.begin(), out.end());  // SLOWLOG GET answers newest first
    return out;
}

double median(std::vector<double> values) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    auto n = values.size();
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace keel::bench
