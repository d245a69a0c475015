#pragma once

// What the order-flow cost benchmark (keel_orders_load) reads before and after a phase: the
// CPU time of a process from /proc/<pid>/stat (utime + stime over all its threads), the
// driver's own from getrusage, and a Redis server's counters (INFO commandstats, persistence
// and stats, its CPU time). A phase_meter takes both snapshots; the differences are divided
// by the flows (or reads) of the phase when they are reported.

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <keel/framework/redis/connection.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace keel::bench {

// utime + stime of process `pid` in seconds, to the nanosecond: the sum over its threads of
// the run time in /proc/<pid>/task/<tid>/schedstat, which is what the kernel scales utime and
// stime from (/proc/<pid>/stat counts them in clock ticks of 10 ms). Threads that exit are
// not counted; neither keel-orders nor redis-server ends a thread while it is measured, and
// phase_meter checks the sum against /proc/<pid>/stat.
double process_cpu_seconds(pid_t pid);
// utime + stime from /proc/<pid>/stat (every thread, exited ones included), in seconds.
double process_stat_cpu_seconds(pid_t pid);
// User + system CPU time of this process (every thread), in seconds.
double self_cpu_seconds();

struct command_stat {
    double calls = 0;
    double usec = 0;
};

// A Redis server's counters at one moment, or the difference between two moments.
struct redis_counters {
    double cpu_seconds = 0;       // the server process's utime + stime (process_cpu_seconds)
    double stat_cpu_seconds = 0;  // the same from /proc/<pid>/stat, to check it
    double aof_bytes = 0;         // INFO persistence aof_current_size
    double aof_rewrites = 0;      // a rewrite in the phase would make aof_bytes meaningless
    double net_in = 0;            // total_net_input_bytes: what clients sent
    double net_out = 0;           // total_net_output_bytes
    double reads = 0;   // total_reads_processed: reads from clients' sockets (request batches)
    double writes = 0;  // total_writes_processed: writes to them (reply batches)
    // INFO commandstats by command ("evalsha", "hset", ...): top-level commands and those
    // run by scripts alike. The probe's own commands (info, slowlog, config) are left out.
    std::map<std::string, command_stat> commands;

    double calls() const;
};
redis_counters operator-(const redis_counters& after, const redis_counters& before);

// A synchronous client of one Redis server for the measurements, on a connection of its own
// (no health-check PINGs, so that it adds nothing to a phase).
class redis_probe {
  public:
    explicit redis_probe(const std::string& url);
    ~redis_probe();
    redis_probe(const redis_probe&) = delete;
    redis_probe& operator=(const redis_probe&) = delete;

    redis::reply command(redis::command cmd);
    std::string info(const std::string& section);
    redis_counters counters();
    pid_t server_pid() const { return pid_; }

  private:
    boost::asio::io_context io_;
    std::optional<redis::connection> connection_;
    pid_t pid_ = -1;
};

// A phase's costs, not yet divided: CPU seconds of the service (when there is one), of
// Redis and of the driver, wall time, and Redis's counters.
struct phase_cost {
    double wall_seconds = 0;
    double service_cpu = 0;
    double driver_cpu = 0;
    // The share of the machine's CPU time that was idle (/proc/stat, all CPUs): on the VM
    // of docs/benchmarks.md ("Two regimes of this VM") a load runs in one of two regimes,
    // cores oversubscribed or a third idle, and CPU per flow compares only within one.
    double idle_share = 0;
    redis_counters redis;
};

// The machine's CPU time so far, in clock ticks summed over its CPUs (/proc/stat).
struct machine_ticks {
    double idle = 0;  // idle and waiting for I/O
    double total = 0;
};
machine_ticks read_machine_ticks();

class phase_meter {
  public:
    // `service`: the pid of the service under load, or -1.
    phase_meter(redis_probe& probe, pid_t service) : probe_(probe), service_(service) {}
    void start();
    phase_cost stop();

  private:
    redis_probe& probe_;
    pid_t service_;
    double wall_ = 0;
    double service_cpu_ = 0;
    double service_stat_cpu_ = 0;
    double driver_cpu_ = 0;
    machine_ticks machine_;
    redis_counters redis_;
};

// The value of `field` in INFO text ("field:value" lines), or 0.
double info_field(const std::string& info, const std::string& field);

// Commands as SLOWLOG recorded them at threshold 0, oldest first. Commands that scripts run
// are recorded too, each before the script that ran it, with the client address "?:0".
struct slowlog_entry {
    std::vector<std::string> args;  // SLOWLOG keeps up to 32, each up to 128 bytes
    double usec = 0;
    bool in_script = false;
};
std::vector<slowlog_entry> read_slowlog(redis_probe& probe);
void start_slowlog(redis_probe& probe);

// The median of `values` (0 when empty).
double median(std::vector<double> values);

}  // namespace keel::bench
