#pragma once

// Redis's own counters around a workload, from INFO: commands processed (those a script runs
// included), calls by command, Redis's time in scripts, its CPU and its memory. For the
// benchmarks that report Redis's work per operation; on a cluster, the sum over its primaries.

#include <keel/test/redis_cluster.hpp>
#include <keel/test/redis_server.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace keel::bench {

// total_commands_processed and each command's calls (a command a script runs counts in both,
// besides the script's own EVALSHA), with Redis's time.
struct redis_counts {
    long total = 0;
    std::map<std::string, long> calls;  // "evalsha" -> calls
    long script_usec = 0;               // Redis's time in EVALSHA calls (their commands included)
    double cpu_seconds = 0;             // redis-server's CPU time, user and system
    long used_memory = 0;               // INFO memory's used_memory, in bytes

    redis_counts& operator+=(const redis_counts& other) {
        total += other.total;
        for (const auto& [name, n] : other.calls) calls[name] += n;
        script_usec += other.script_usec;
        cpu_seconds += other.cpu_seconds;
        used_memory += other.used_memory;
        return *this;
    }
};

// The sections read_counts() asks INFO for.
inline const std::vector<std::string> counts_info{"INFO", "stats", "commandstats", "cpu", "memory"};

// The counters in the text of `INFO stats commandstats cpu memory`.
inline redis_counts parse_counts(const std::string& info) {
    redis_counts c;
    std::istringstream in(info);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.starts_with("total_commands_processed:")) {
            c.total = std::stol(line.substr(line.find(':') + 1));
        } else if (line.starts_with("cmdstat_")) {
            auto colon = line.find(':');
            auto calls = line.find("calls=");
            auto name = line.substr(8, colon - 8);
            c.calls[name] = std::stol(line.substr(calls + 6));
            if (name == "evalsha") c.script_usec = std::stol(line.substr(line.find("usec=") + 5));
        } else if (line.starts_with("used_cpu_user:") || line.starts_with("used_cpu_sys:")) {
            c.cpu_seconds += std::stod(line.substr(line.find(':') + 1));
        } else if (line.starts_with("used_memory:")) {
            c.used_memory = std::stol(line.substr(line.find(':') + 1));
        }
    }
    return c;
}

inline redis_counts read_counts(const keel::test::redis_server& server) {
    return parse_counts(server.cli(counts_info));
}

// The sum over the cluster's `primaries` (its replicas, if any, left out).
inline redis_counts read_counts(const keel::test::redis_cluster& cluster,
                                const std::vector<std::uint16_t>& primaries) {
    redis_counts sum;
    for (auto port : primaries) sum += parse_counts(cluster.cli(port, counts_info));
    return sum;
}

}  // namespace keel::bench
