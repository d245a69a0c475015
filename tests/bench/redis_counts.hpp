#pragma once

// Redis's own counters around a workload, from INFO: commands processed (those a script runs
// included), calls by command, Redis's time in scripts and its CPU. For the benchmarks that
// report Redis's work per operation.

#include <keel/test/redis_server.hpp>
#include <map>
#include <sstream>
#include <string>

namespace keel::bench {

// total_commands_processed and each command's calls (a command a script runs counts in both,
// besides the script's own EVALSHA), with Redis's time.
struct redis_counts {
    long total = 0;
    std::map<std::string, long> calls;  // "evalsha" -> calls
    long script_usec = 0;               // Redis's time in EVALSHA calls (their commands included)
    double cpu_seconds = 0;             // redis-server's CPU time, user and system
};

inline redis_counts read_counts(const keel::test::redis_server& server) {
    redis_counts c;
    std::istringstream in(server.cli({"INFO", "stats", "commandstats", "cpu"}));
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
        }
    }
    return c;
}

}  // namespace keel::bench
