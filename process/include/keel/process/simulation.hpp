#pragma once

/// @file
/// keel::process::simulation: deterministic simulation of process instances under faults.
///
/// One run executes a scenario on the in-memory store with a manual clock, several engines
/// (workers, every other one of two parts) on one io_context, and a scheduler driven by a
/// seed. With faults on, it also
/// - crashes a worker at a durable-operation boundary (before or after a commit, after it
///   stored a request's answer, or while a run step is in flight): its memory is dropped and
///   a new worker takes over by replay;
/// - loses a commit's acknowledgement (the write happened; the worker sees an error);
/// - loses an acknowledged commit, as a Redis failover does when the primary fails before
///   its replica has the write (the journal is shorter than the worker believes);
/// - delivers every signal twice with the same idempotency key (sometimes);
/// - stalls a worker holding a commit until its lease expires, so another worker takes over
///   and the stalled write, resumed, must be fenced;
/// - sets each worker's clock off the true time, within sim_faults::max_clock_skew.
///
/// check(seed) runs the seed without and with faults and compares: the same final states and
/// results; every journal free of duplicate operations and equal in shape; every signal
/// consumed at most once and the same set consumed; each request (a signal keyed
/// `request:<id>`) answered with the same answer, never stored with another; at most one
/// worker committing per instance and epoch. Everything derives from the seed, so a failing seed
/// replays exactly.
///
/// Not thread-safe; one simulation runs on the calling thread.

#include <chrono>
#include <functional>
#include <keel/process/engine.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace keel::process {

/// What a scenario does in one run: instances to start and signals to send, at virtual times
/// relative to the start of the run.
struct sim_plan {
    /// An instance start, as engine::start_instance takes it, or engine::enqueue_instance
    /// when `queue` names one of the scenario's queues (a client retries it until the
    /// instance exists, as the worker it asked may crash).
    struct start {
        duration at{};           ///< when, after the start of the run
        std::string definition;  ///< the definition's name (its pattern)
        std::string id;          ///< the instance id, as the definition makes it
        nlohmann::json params;   ///< the parameters as stored (definition::encode_params)
        std::string queue;       ///< the queue it is enqueued on; empty: started directly
        std::string partition;   ///< its partition of that queue
    };
    /// A signal delivered to an instance's inbox.
    struct signal {
        duration at{};           ///< when, after the start of the run
        std::string instance;    ///< the instance id
        std::string path;        ///< the signal's path
        nlohmann::json payload;  ///< its payload
        std::string key;         ///< its idempotency key (`request:<id>` for a request)
    };
    std::vector<start> starts;    ///< in any order: the run sorts them by time
    std::vector<signal> signals;  ///< in any order: the run sorts them by time
};

/// A scenario to simulate: the definitions every worker runs and a plan per seed.
struct sim_scenario {
    std::string name;  ///< for the test's own messages
    /// Registers the definitions on a new worker's engine (dependencies must outlive the run).
    std::function<void(engine&)> define;
    /// The plan for a seed, drawn from `rng` (the same for the runs with and without faults).
    std::function<sim_plan(std::mt19937_64& rng)> plan;
    /// Queues every worker registers (engine::add_queue). After every scheduler step, each
    /// queue's admitted instances, in all and per partition, must be within its limits. A
    /// queue's admission loop always has a next round, so a run with queues ends once the
    /// plan is done and every instance is final (or parked), not when time has nothing left.
    std::vector<queue> queues;
};

/// How often each fault is injected in a run with faults: probabilities, each per the event
/// named.
struct sim_faults {
    double crash_at_commit = 0.06;  ///< per commit: crash before or after writing
    double lost_ack = 0.05;         ///< per commit: written, but the worker sees an error
    double lost_commit = 0.03;      ///< per commit: acknowledged, then lost by a failover
    double crash_in_flight = 0.01;  ///< per scheduler step while a worker holds instances
    double lease_pause = 0.03;      ///< per commit: stall the worker past its lease first
    double duplicate = 0.3;         ///< per signal: deliver it twice
    /// Each worker's clock is off the true time by an amount drawn from
    /// [-max_clock_skew, +max_clock_skew] (leases, timers and starts read it).
    duration max_clock_skew{};
};

/// The observable end state of one run.
struct sim_outcome {
    /// By instance id: its status, result, error, journal shape, consumed signal keys and
    /// answers to requests.
    nlohmann::json instances;
    std::vector<std::string> violations;  ///< what the run found wrong; empty when nothing
    /// What happened, one line per event (starts, signals, crashes, take-overs, lost
    /// acknowledgements, ...), each stamped with the virtual time since the run's start.
    std::vector<std::string> trace;
    std::size_t faults = 0;  ///< how many faults were injected
    std::size_t steps = 0;   ///< scheduler steps the run took (at most 200,000: then a violation)
    /// Leases granted over a live, unstalled holder whose own clock said the lease still ran
    /// (possible only with clocks apart).
    std::size_t early_takeovers = 0;
};

/// Runs a scenario, one seed at a time, without and with faults (see the file's description).
class simulation {
  public:
    /// A simulation of `scenario`, injecting `faults` in the runs with faults.
    explicit simulation(sim_scenario scenario, sim_faults faults = {});

    /// One run of `seed`, with or without faults.
    sim_outcome run(std::uint64_t seed, bool with_faults) const;

    /// Runs the seed without and with faults; the violations found (empty when it passed).
    /// The run with faults is left in `faulty` when given.
    std::vector<std::string> check(std::uint64_t seed, sim_outcome* faulty = nullptr) const;

  private:
    sim_scenario scenario_;
    sim_faults faults_;
};

}  // namespace keel::process
