// The store contract, checked by random operation sequences run side by side on the memory
// store (the reference model) and on the Redis store: on one redis-server, or with
// KEEL_PROCESS_STORE=cluster on the shared Redis Cluster. Every answer of every call is
// rendered as text (describe()) and compared, and so is the whole state (every instance's
// load, counts, next_due, the workers, a listing walk and the journals) every few operations
// and at the end.
//
// Each sequence is drawn from a seed (std::mt19937_64, no other source of randomness) over a
// small universe (6 instance ids over the 4 shards, 3 workers, 3 definition versions, 3
// signal paths and subscription keys, a few idempotency keys; three queues with different
// limits over 6 entries, 3 partitions and 2 dedup ids; three limits on steps over 4 holders)
// so that operations collide often. Operations
// are mostly plausible (the lease and journal length the memory store has now, inbox ids that are
// there) and sometimes not (a stale lease, a wrong length, a missing inbox id), so both the writes
// and the refusals are compared. Time is a logical clock that only moves forward, in whole
// milliseconds from t0, so that the Redis store's rounding to milliseconds changes nothing.
//
// Budget: 200 seeds x 60 operations on one redis-server, about 6 s; 20 seeds on the cluster,
// about 3 s once the cluster runs (measured on an idle 2-core machine, RelWithDebInfo). For
// more:
//   KEEL_DIFF_SEEDS=5000 keel_process_tests --gtest_filter='store_differential*'   seeds 1..5000
//   KEEL_DIFF_SEED=1234  keel_process_tests --gtest_filter='store_differential*'   one seed
//   KEEL_DIFF_OPS=300 ...                                                          longer runs
// A divergence fails the case with the seed, the operations up to it, both answers, the
// command that reruns that seed, and the sequence shrunk to the operations it needs.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <keel/process/memory_store.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "store_fixture.hpp"

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using namespace keel::process;
using keel::process::testing_support::t0;

// --- the universe -----------------------------------------------------------------------

constexpr std::size_t shards = 4;
// Shards 1, 0, 3, 0, 2, 2 of 4 (checked by universe_covers_every_shard).
constexpr std::array<std::string_view, 6> ids{"order/o-1",   "order/o-2",   "order/o-3",
                                              "invoice/i-1", "invoice/i-3", "order/o-4"};
constexpr std::array<std::string_view, 3> workers{"w1", "w2", "w3"};
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> definitions{
    {{"order", "1"}, {"order", "2"}, {"invoice", ""}}};
constexpr std::array<std::string_view, 3> paths{"/pay", "/ship", "/cancel"};
constexpr std::array<std::string_view, 3> topics{"sub/a", "sub/b", "sub/c"};
constexpr std::array<std::string_view, 4> signal_keys{"", "k1", "k2", "k3"};
constexpr std::array<std::string_view, 4> fan_out_keys{"", "f1", "f2", "k1"};
constexpr std::array<std::string_view, 3> steps{"charge", "ship", "notify"};
// Queues: each with other limits; their entries name instances of their own (a queue call
// does not read the instance), few enough to collide.
const std::array<queue, 3> queues{
    queue{.name = "qa", .concurrency = 2, .partition_concurrency = 1},
    queue{.name = "qb", .concurrency = 3, .worker_concurrency = 1, .rate = 2, .per = 2s},
    queue{.name = "qc"}};
constexpr std::array<std::string_view, 6> queued_ids{"j1", "j2", "j3", "j4", "j5", "j6"};
constexpr std::array<std::string_view, 3> partitions{"", "p1", "p2"};
constexpr std::array<std::string_view, 3> dedup_ids{"", "d1", "d2"};
// Limits on steps: one of each kind and one with both; their holders are attempts' names.
const std::array<limit, 3> limits{
    limit{.name = "la", .rate = 2, .per = 1s},
    limit{.name = "lb", .concurrency = 2, .max_hold = 5s},
    limit{.name = "lc", .rate = 3, .per = 2s, .concurrency = 1, .max_hold = 3s}};
constexpr std::array<std::string_view, 4> holders{"order/o-1#2", "order/o-2#2", "order/o-3#4",
                                                  "invoice/i-1#1"};
constexpr std::size_t big_limit = 100;  // more than the universe: due() returns everything due

// The Redis store's due() claims what it returns (hidden from other pollers for claim_ttl);
// the memory store serves one process and does not. With a claim of 1 ms, and the clock moved
// at least that far after every due(), a claim hides nothing from the next call, so both
// stores answer alike; the hiding itself is Redis-only behaviour and is not compared here.
constexpr keel::duration claim_ttl = 1ms;

// --- operations ---------------------------------------------------------------------------

struct start_op {
    start_request req;
};
struct deliver_op {
    std::string id;
    inbox_entry signal;
};
struct fan_out_op {
    fan_out_request req;
};
struct acquire_op {
    std::string id;
    std::string worker;
    keel::time_point now;
    keel::duration ttl;
    version_refusals refused;
};
struct take_op {
    acquire_op grant;
    std::optional<std::uint64_t> known_length;
};
struct renew_op {
    std::string id;
    lease_token lease;
    keel::time_point now;
    keel::duration ttl;
};
struct release_op {
    std::string id;
    lease_token lease;
};
struct leave_op {
    std::string id;
    lease_token lease;
    departure why;
};
struct note_attempt_op {
    std::string id;
    lease_token lease;
    step_attempt failed;
};
struct commit_op {
    commit_request req;
};
struct due_op {
    keel::time_point now;
    std::size_t limit = big_limit;
    version_refusals refused;
};
struct rewind_op {
    rewind_request req;
};
struct remove_signal_op {
    remove_signal_request req;
};
struct list_op {
    list_query query;
};
struct counts_op {};
struct read_journal_op {
    std::string id;
    std::size_t retry = 0;
    std::uint64_t offset = 0;
    std::size_t limit = 0;
};
struct next_due_op {
    keel::time_point now;  // what "due already" means for the answer
};
struct announce_op {
    worker_record self;
};
struct workers_op {
    keel::time_point now;
};
struct withdraw_op {
    std::string worker;
};
struct enqueue_op {
    queue q;
    queue_entry entry;
    keel::duration recheck;
};
struct admit_op {
    queue q;
    keel::time_point now;
    std::size_t max;
    keel::duration recheck;
    std::string worker;
};
struct leave_queue_op {
    std::string queue;
    std::vector<std::string> instances;
};
struct describe_queue_op {
    std::string queue;
    std::size_t top;
};
struct acquire_permit_op {
    limit l;
    std::string holder;
    keel::time_point now;
};
struct release_permit_op {
    std::string limit;
    std::string holder;
};
// Not a call: the whole state as both stores see it (loads, counts, next_due, workers, a
// listing walk, journals), compared every few operations and at the end.
struct check_op {
    keel::time_point now;
};

using operation =
    std::variant<start_op, deliver_op, fan_out_op, acquire_op, take_op, renew_op, release_op,
                 leave_op, note_attempt_op, commit_op, due_op, rewind_op, remove_signal_op, list_op,
                 counts_op, read_journal_op, next_due_op, announce_op, workers_op, withdraw_op,
                 enqueue_op, admit_op, leave_queue_op, describe_queue_op, acquire_permit_op,
                 release_permit_op, check_op>;

// --- rendering ----------------------------------------------------------------------------
// Times as milliseconds from t0; everything else as close to the field names as fits a line.

std::string at(keel::time_point t) {
    auto ms = [](keel::time_point p) {
        return std::chrono::floor<std::chrono::milliseconds>(p.time_since_epoch()).count();
    };
    if (t == keel::time_point{}) return "0";
    return fmt::format("t0{:+}ms", ms(t) - ms(t0));
}
std::string ms(keel::duration d) {
    return fmt::format("{}ms", std::chrono::floor<std::chrono::milliseconds>(d).count());
}

// Declared first: list_of() and the optional's describe() find them from their templates.
std::string describe(const std::string& s);
std::string describe(std::uint64_t n);
std::string describe(const lease_token& l);
std::string describe(const journal_entry& e);
std::string describe(const inbox_entry& e);
std::string describe(const timer_record& t);
std::string describe(const signal_wait& w);
std::string describe(const retry_record& r);
std::string describe(const removed_signal& r);
std::string describe(const step_attempt& a);
std::string describe(const departure& d);
std::string describe(const worker_record& w);
std::string describe(const instance_summary& s);
std::string describe(const admission& a);
std::string describe(const queue_partition_state& p);

template <class T, class F>
std::string list_of(const std::vector<T>& items, F each) {
    std::string out = "[";
    for (const auto& item : items) out += (out.size() > 1 ? ", " : "") + each(item);
    return out + "]";
}
template <class T>
std::string list_of(const std::vector<T>& items) {
    return list_of(items, [](const auto& x) { return describe(x); });
}

std::string describe(const std::string& s) {
    return "'" + s + "'";
}
std::string describe(std::uint64_t n) {
    return std::to_string(n);
}
std::string describe(const lease_token& l) {
    return fmt::format("{}#{}", l.worker, l.epoch);
}
std::string describe(const journal_entry& e) {
    return fmt::format("{}:{} '{}' {}{} at={} started={} attempts={}", e.seq, to_string(e.kind),
                       e.name, e.value.dump(), e.failed ? " failed" : "", at(e.at), at(e.started),
                       e.attempts);
}
std::string describe(const inbox_entry& e) {
    return fmt::format("#{} key='{}' {} {} at={} trace='{}'", e.id, e.key, e.path, e.payload.dump(),
                       at(e.at), e.trace);
}
std::string describe(const timer_record& t) {
    return fmt::format("timer {} '{}' due={}", t.seq, t.name, at(t.due));
}
std::string describe(const signal_wait& w) {
    return fmt::format("wait {} {}", w.seq, w.path);
}
std::string describe(const retry_record& r) {
    return fmt::format("retry from={} at={} length={} left_out={}", r.from, at(r.at),
                       r.journal_length, list_of(r.left_out));
}
std::string describe(const removed_signal& r) {
    return fmt::format("removed {} at={}", describe(r.signal), at(r.removed));
}
std::string describe(const step_attempt& a) {
    return fmt::format("attempt seq={} '{}' #{} '{}' by {} at={}", a.seq, a.name, a.attempt,
                       a.error, a.worker, at(a.at));
}
std::string describe(const departure& d) {
    return fmt::format("left by {} version '{}' '{}' at={}", d.worker, d.version, d.reason,
                       at(d.at));
}
std::string describe(const version_refusals& refused) {
    return list_of(refused, [](const auto& r) { return r.first + "@" + r.second; });
}
std::string describe(const enqueued& e) {
    return fmt::format("{}{}{}", e.instance, e.fresh ? " fresh" : "",
                       e.admitted ? " admitted" : "");
}
std::string describe(const admission& a) {
    return fmt::format("{} enqueued={}{}", a.instance, at(a.enqueued_at), a.fresh ? " fresh" : "");
}
std::string describe(const admission_round& r) {
    return fmt::format("next={} waiting={} {}", r.next ? at(*r.next) : "none", r.waiting,
                       list_of(r.admitted));
}
std::string describe(const queue_partition_state& p) {
    return fmt::format("'{}' waiting={} admitted={}", p.name, p.waiting, p.admitted);
}
std::string describe(const queue_state& q) {
    return fmt::format("waiting={} admitted={} {}{}", q.waiting, q.admitted, list_of(q.partitions),
                       q.more_partitions ? " more" : "");
}
template <class T>
std::string describe(const std::optional<T>& v) {
    return v ? describe(*v) : std::string("none");
}

// Every field of a snapshot, one line each, so a report points at the one that differs.
std::string describe(const instance_snapshot& s) {
    std::string out = fmt::format("  {} {}@'{}' {}{} params={}\n", s.id, s.definition, s.version,
                                  to_string(s.status), s.parked ? " parked" : "", s.params.dump());
    out += fmt::format("  result={} error={}\n", s.result ? s.result->dump() : "none",
                       describe(s.error));
    out += "  journal=" + list_of(s.journal) + "\n";
    out += "  inbox=" + list_of(s.inbox) + "\n";
    out += "  timers=" + list_of(s.timers) + " waits=" + list_of(s.waits) + "\n";
    out += fmt::format("  lease={} expires={}\n", describe(s.lease), at(s.lease_expires));
    out += fmt::format("  created={} changed={}\n", at(s.created), at(s.changed));
    out += "  retries=" + list_of(s.retries) + " attempts=" + list_of(s.attempts) + "\n";
    out += "  removed=" + list_of(s.removed) + "\n";
    out += "  " + describe(s.left) + "\n";
    return out;
}
std::string describe(const std::optional<instance_snapshot>& s) {
    return s ? "\n" + describe(*s) : std::string("none\n");
}

std::string describe(const start_result& r) {
    return fmt::format("created={} lease={} status={} documents_changed={}", r.created,
                       describe(r.lease), to_string(r.status), r.documents_changed);
}
std::string describe(const lease_grant& g) {
    return fmt::format("lease={} length={} status={} expires={} taken_over={}", describe(g.lease),
                       g.journal_length, to_string(g.status), at(g.expires), g.taken_over);
}
std::string describe(const taken_instance& t) {
    return fmt::format("{} with_journal={} resumed={}", describe(t.grant), t.with_journal,
                       t.resumed) +
           describe(std::optional(t.snapshot));
}
std::string_view name_of(delivery::outcome o) {
    switch (o) {
        case delivery::outcome::stored:
            return "stored";
        case delivery::outcome::duplicate:
            return "duplicate";
        case delivery::outcome::no_instance:
            return "no_instance";
        case delivery::outcome::finished:
            return "finished";
    }
    return "?";
}
std::string describe(const delivery& d) {
    return fmt::format("{} waiting={} id={}", name_of(d.result), d.waiting, d.id);
}
std::string describe(const commit_result& r) {
    return fmt::format("ok signal_waiting={}", r.signal_waiting);
}
std::string describe(const keel::expected<void, store_error>& r) {
    return r ? std::string("ok") : "error " + std::string(to_string(r.error()));
}
template <class T>
std::string describe(const keel::expected<T, store_error>& r) {
    return r ? describe(*r) : "error " + std::string(to_string(r.error()));
}

// A fan-out's take carries only what store.hpp's fan_out_request names: id, definition,
// version, status, parked, wait set, inbox, timers and the new lease. The rest (params,
// journal, result, ...) is the memory store's whole snapshot but left out by Redis, as the
// contract allows.
std::string describe_fan_out_take(const taken_instance& t) {
    const auto& s = t.snapshot;
    return fmt::format(
        "{} with_journal={} resumed={} | {} {}@'{}' {}{} waits={} inbox={} "
        "timers={} lease={} expires={}",
        describe(t.grant), t.with_journal, t.resumed, s.id, s.definition, s.version,
        to_string(s.status), s.parked ? " parked" : "", list_of(s.waits), list_of(s.inbox),
        list_of(s.timers), describe(s.lease), at(s.lease_expires));
}

// The order of `delivered` and `taken` is not specified (a cluster gathers shards in shard
// order, one server and the memory store by id): sorted by id.
std::string describe(const fan_out_result& r) {
    std::vector<std::string> delivered, taken;
    for (const auto& [id, d] : r.delivered) delivered.push_back(id + ": " + describe(d));
    for (const auto& [id, t] : r.taken) taken.push_back(id + ": " + describe_fan_out_take(t));
    std::sort(delivered.begin(), delivered.end());
    std::sort(taken.begin(), taken.end());
    std::string out = fmt::format("reached={} duplicate={} documents_changed={}", r.reached,
                                  r.duplicate, r.documents_changed);
    for (const auto& d : delivered) out += "\n  delivered " + d;
    for (const auto& t : taken) out += "\n  taken " + t;
    return out;
}

std::string describe(const instance_counts& counts) {
    std::string out;
    for (const auto& [definition, per_status] : counts) {
        out += "  " + definition + ":";
        for (std::size_t s = 0; s < index_status_count; ++s)
            out += fmt::format(" {}={}", to_string(static_cast<index_status>(s)), per_status[s]);
        out += "\n";
    }
    return out;
}
std::string describe(const std::optional<journal_page>& page) {
    if (!page) return "none";
    return fmt::format("total={} entries={}", page->total, list_of(page->entries));
}
std::string describe(const worker_record& w) {
    std::string versions;
    for (const auto& [definition, version] : w.versions)
        versions += fmt::format(" {}@'{}'", definition, version);
    return fmt::format("{} seen={} expires={}{}", w.worker, at(w.seen), at(w.expires), versions);
}
std::string describe(const instance_summary& s) {
    return fmt::format("{} {} {} created={} changed={}", s.id, s.definition, to_string(s.status),
                       at(s.created), at(s.changed));
}
// "Due already" for any time not after `now`: an unleased running instance is due at
// time_point::min() in memory and at the epoch in Redis, and an instance a due() claimed is
// due at the claim's end in Redis (claim_ttl, over before `now`) but at its own time in
// memory. Both mean that due(now) returns it.
std::string describe_next_due(std::optional<keel::time_point> next, keel::time_point now) {
    if (!next) return "none";
    if (*next <= now) return "due already";
    return at(*next);
}

// --- rendering operations ----------------------------------------------------------------

std::string render(const start_op& op) {
    const auto& r = op.req;
    auto out = fmt::format("start {} {}@'{}' worker={} ttl={} params={} subs={} now={}", r.id,
                           r.definition, r.version, r.worker, ms(r.lease_ttl), r.params.dump(),
                           list_of(r.subscriptions, [](const auto& s) { return s; }), at(r.now));
    if (r.suspended)
        out += " suspended: entries=" + list_of(r.suspended->entries) +
               " timers=" + list_of(r.suspended->timers) + " waits=" + list_of(r.suspended->waits) +
               (r.suspended->queued ? " queued" : "");
    return out;
}
std::string render(const deliver_op& op) {
    return "deliver " + op.id + " " + describe(op.signal);
}
std::string render(const fan_out_op& op) {
    const auto& r = op.req;
    auto out = fmt::format("fan_out subs={} signal={} window={}",
                           list_of(r.subscriptions, [](const auto& s) { return s; }),
                           describe(r.signal), ms(r.window));
    if (r.take)
        out += fmt::format(" take by {} now={} ttl={} refused={}", r.take->worker, at(r.take->now),
                           ms(r.take->ttl), describe(r.take->refused));
    return out;
}
std::string render(const acquire_op& op) {
    return fmt::format("acquire {} by {} now={} ttl={} refused={}", op.id, op.worker, at(op.now),
                       ms(op.ttl), describe(op.refused));
}
std::string render(const take_op& op) {
    return "take (" + render(op.grant) + ") known_length=" + describe(op.known_length);
}
std::string render(const renew_op& op) {
    return fmt::format("renew {} lease={} now={} ttl={}", op.id, describe(op.lease), at(op.now),
                       ms(op.ttl));
}
std::string render(const release_op& op) {
    return fmt::format("release {} lease={}", op.id, describe(op.lease));
}
std::string render(const leave_op& op) {
    return fmt::format("leave {} lease={} {}", op.id, describe(op.lease), describe(op.why));
}
std::string render(const note_attempt_op& op) {
    return fmt::format("note_attempt {} lease={} {}", op.id, describe(op.lease),
                       describe(op.failed));
}
std::string render(const commit_op& op) {
    const auto& c = op.req;
    auto out = fmt::format("commit {} lease={} expected_length={} now={}", c.instance,
                           describe(c.lease), c.expected_length, at(c.now));
    if (!c.entries.empty()) out += " entries=" + list_of(c.entries);
    if (!c.consume.empty()) out += " consume=" + list_of(c.consume);
    if (!c.add_timers.empty()) out += " add_timers=" + list_of(c.add_timers);
    if (!c.cancel_timers.empty()) out += " cancel_timers=" + list_of(c.cancel_timers);
    if (c.waits) out += " waits=" + list_of(*c.waits);
    if (c.status) out += " status=" + std::string(to_string(*c.status));
    if (c.parked) out += " parked";
    if (c.result) out += " result=" + c.result->dump();
    if (c.error) out += " error='" + *c.error + "'";
    if (c.release) out += " release";
    if (c.restart_params) out += " restart_params=" + c.restart_params->dump();
    return out;
}
std::string render(const due_op& op) {
    return fmt::format("due now={} limit={} refused={}", at(op.now), op.limit,
                       describe(op.refused));
}
std::string render(const rewind_op& op) {
    const auto& r = op.req;
    return fmt::format("rewind {} expected_length={} keep={} now={} restore={} left_out={}",
                       r.instance, r.expected_length, r.keep, at(r.now), list_of(r.restore),
                       list_of(r.left_out));
}
std::string render(const remove_signal_op& op) {
    return fmt::format("remove_signal {} inbox_id={} now={}", op.req.instance, op.req.inbox_id,
                       at(op.req.now));
}
std::string render(const list_op& op) {
    const auto& q = op.query;
    return fmt::format("list definition={} status={} prefix='{}' since={} until={} limit={}",
                       q.definition.value_or("*"),
                       q.status ? std::string(to_string(*q.status)) : "*", q.prefix,
                       q.since ? at(*q.since) : "*", q.until ? at(*q.until) : "*", q.limit);
}
std::string render(const counts_op&) {
    return "counts";
}
std::string render(const read_journal_op& op) {
    return fmt::format("read_journal {} retry={} offset={} limit={}", op.id, op.retry, op.offset,
                       op.limit);
}
std::string render(const next_due_op& op) {
    return "next_due (now=" + at(op.now) + ")";
}
std::string render(const announce_op& op) {
    return "announce " + describe(op.self);
}
std::string render(const workers_op& op) {
    return "workers now=" + at(op.now);
}
std::string render(const withdraw_op& op) {
    return "withdraw " + op.worker;
}
std::string render(const enqueue_op& op) {
    const auto& e = op.entry;
    return fmt::format(
        "enqueue {} on {} partition='{}' priority={} dedup='{}' by '{}' at={} "
        "recheck={}",
        e.instance, op.q.name, e.options.partition, e.options.priority, e.options.dedup, e.worker,
        at(e.at), ms(op.recheck));
}
std::string render(const admit_op& op) {
    return fmt::format("admit on {} now={} max={} recheck={} by '{}'", op.q.name, at(op.now),
                       op.max, ms(op.recheck), op.worker);
}
std::string render(const leave_queue_op& op) {
    return fmt::format("leave_queue {} {}", op.queue, list_of(op.instances));
}
std::string render(const describe_queue_op& op) {
    return fmt::format("describe_queue {} top={}", op.queue, op.top);
}
std::string render(const acquire_permit_op& op) {
    return fmt::format("acquire_permit {} for {} at={}", describe(op.l), op.holder, at(op.now));
}
std::string render(const release_permit_op& op) {
    return fmt::format("release_permit {} for {}", op.limit, op.holder);
}
std::string render(const check_op& op) {
    return "check the whole state (now=" + at(op.now) + ")";
}
std::string render(const operation& op) {
    return std::visit([](const auto& o) { return render(o); }, op);
}

// --- performing operations ---------------------------------------------------------------

// One store under comparison: performs an operation and renders its answer. A call that
// throws answers with its exception's message, compared like any answer.
class side {
  public:
    side(store& st, asio::io_context& io) : st_(st), io_(io) {}

    std::string perform(const operation& op) {
        try {
            return std::visit([this](const auto& o) { return answer(o); }, op);
        } catch (const std::exception& e) {
            return std::string("threw: ") + e.what();
        }
    }

  private:
    template <class T>
    T run(asio::awaitable<T> task) {
        return keel::test::run(io_, std::move(task));
    }
    void run(asio::awaitable<void> task) { keel::test::run(io_, std::move(task)); }

    std::string answer(const start_op& op) { return describe(run(st_.start(op.req))); }
    std::string answer(const deliver_op& op) {
        return describe(run(st_.deliver(op.id, op.signal)));
    }
    std::string answer(const fan_out_op& op) { return describe(run(st_.fan_out(op.req))); }
    std::string answer(const acquire_op& op) {
        return describe(run(st_.acquire(op.id, op.worker, op.now, op.ttl, op.refused)));
    }
    std::string answer(const take_op& op) {
        const auto& g = op.grant;
        return describe(run(st_.take(g.id, g.worker, g.now, g.ttl, g.refused, op.known_length)));
    }
    std::string answer(const renew_op& op) {
        return fmt::format("{}", run(st_.renew(op.id, op.lease, op.now, op.ttl)));
    }
    std::string answer(const release_op& op) {
        run(st_.release(op.id, op.lease));
        return "done";
    }
    std::string answer(const leave_op& op) {
        run(st_.leave(op.id, op.lease, op.why));
        return "done";
    }
    std::string answer(const note_attempt_op& op) {
        return fmt::format("{}", run(st_.note_attempt(op.id, op.lease, op.failed)));
    }
    std::string answer(const commit_op& op) { return describe(run(st_.commit(op.req))); }
    // The order is not specified (Redis goes shard by shard from a shard the time picks), so
    // the ids are sorted; and with a limit below what is due, which ones come first is not
    // specified either: then only how many.
    std::string answer(const due_op& op) {
        auto due = run(st_.due(op.now, op.limit, op.refused));
        if (op.limit < ids.size()) return fmt::format("{} due", due.size());
        std::sort(due.begin(), due.end());
        return list_of(due, [](const auto& id) { return id; });
    }
    std::string answer(const rewind_op& op) { return describe(run(st_.rewind(op.req))); }
    std::string answer(const remove_signal_op& op) {
        auto r = run(st_.remove_signal(op.req));
        return r ? describe(*r) : std::string(to_string(r.error()));
    }
    std::string answer(const list_op& op) { return walk(op.query); }
    std::string answer(const counts_op&) { return "\n" + describe(run(st_.counts())); }
    std::string answer(const read_journal_op& op) {
        return describe(run(st_.read_journal(op.id, op.retry, op.offset, op.limit)));
    }
    std::string answer(const next_due_op& op) {
        return describe_next_due(run(st_.next_due()), op.now);
    }
    std::string answer(const announce_op& op) { return list_of(run(st_.announce(op.self))); }
    std::string answer(const workers_op& op) { return list_of(run(st_.workers(op.now))); }
    std::string answer(const withdraw_op& op) {
        run(st_.withdraw(op.worker));
        return "done";
    }
    std::string answer(const enqueue_op& op) {
        return describe(run(st_.enqueue(op.q, op.entry, op.recheck)));
    }
    std::string answer(const admit_op& op) {
        return describe(run(st_.admit(op.q, op.now, op.max, op.recheck, op.worker)));
    }
    std::string answer(const leave_queue_op& op) {
        run(st_.leave_queue(op.queue, op.instances));
        return "done";
    }
    std::string answer(const describe_queue_op& op) {
        return describe(run(st_.describe_queue(op.queue, op.top)));
    }
    std::string answer(const acquire_permit_op& op) {
        auto a = run(st_.acquire_permit(op.l, op.holder, op.now));
        return a.granted ? "granted" : "not now, again in " + ms(a.retry_after);
    }
    std::string answer(const release_permit_op& op) {
        run(st_.release_permit(op.limit, op.holder));
        return "done";
    }
    std::string answer(const check_op& op) {
        std::string out = "\n";
        for (auto id : ids) {
            auto whole = run(st_.load(std::string(id), true));
            out += "load " + std::string(id) + ": " + describe(whole);
            out += "without journal: " + describe(run(st_.load(std::string(id), false)));
            for (std::size_t retry = 0; whole && retry <= whole->retries.size(); ++retry)
                out += fmt::format("journal of retry {}: {}\n", retry,
                                   describe(run(st_.read_journal(std::string(id), retry, 0, 100))));
        }
        out += "counts:\n" + describe(run(st_.counts()));
        out += "next_due: " + describe_next_due(run(st_.next_due()), op.now) + "\n";
        out += "workers: " + list_of(run(st_.workers(op.now))) + "\n";
        out += "listing:" + walk(list_query{.limit = 2}) + "\n";
        for (const auto& q : queues)
            out += "queue " + q.name + ": " + describe(run(st_.describe_queue(q.name, 10))) + "\n";
        return out;
    }

    // Every page of a listing, one line each. A page as full as the limit names a next page in
    // Redis even when nothing follows (the memory store looks one further): that empty last
    // page is not rendered.
    std::string walk(list_query query) {
        std::string out;
        for (int page = 0; page < 20; ++page) {
            auto p = run(st_.list(query));
            if (page > 0 && p.instances.empty() && p.next.empty()) break;
            out += "\n  page " + list_of(p.instances);
            if (p.next.empty()) break;
            query.cursor = p.next;
        }
        return out;
    }

    store& st_;
    asio::io_context& io_;
};

// --- drawing operations ------------------------------------------------------------------

// Draws operations from a seed. Plausible operations are built from the memory store's
// state at the time (load_now has no effects); the leases and signals the instances ever had
// are remembered to draw stale leases and the signals a rewind puts back.
class generator {
  public:
    generator(std::uint64_t seed, const memory_store& model) : rng_(seed), model_(model) {}

    // The whole state compared, past a claim of a due() just before (claim_ttl).
    check_op check() {
        if (after_due_) now_ += claim_ttl;
        after_due_ = false;
        return check_op{now_};
    }

    operation next() {
        advance();
        if (chance(15)) return draw_queue_call();
        if (chance(12)) return draw_permit_call();
        auto roll = below(100);
        if (roll < 12) return draw_start();
        if (roll < 22) return draw_deliver();
        if (roll < 30) return draw_fan_out();
        if (roll < 36) return draw_acquire();
        if (roll < 44) return draw_take();
        if (roll < 58) return draw_lease_use();
        if (roll < 80) return draw_commit();
        if (roll < 85) return draw_due();
        if (roll < 88) return draw_rewind();
        if (roll < 90) return draw_remove_signal();
        return draw_read();
    }

    // After each operation: what the instances hold now.
    void observe() {
        for (auto id : ids) {
            auto s = peek(std::string(id));
            if (!s) continue;
            auto& seen = leases_[s->id];
            if (s->lease && std::find(seen.begin(), seen.end(), *s->lease) == seen.end())
                seen.push_back(*s->lease);
            for (const auto& e : s->inbox) signals_.insert_or_assign({s->id, e.id}, e);
        }
    }

  private:
    // Randomness. rng_() % n rather than the standard distributions, whose results differ
    // between standard libraries: a seed draws the same sequence everywhere.
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }
    int between(int lo, int hi) { return lo + static_cast<int>(below(hi - lo + 1)); }
    bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
    template <class C>
    std::string pick(const C& items) {
        return std::string(items[below(items.size())]);
    }
    keel::duration millis(int lo, int hi) { return std::chrono::milliseconds(between(lo, hi)); }
    keel::duration lease_ttl() { return chance(50) ? 10s : 30s; }

    // Mostly small steps; sometimes far enough for leases (10 s, 30 s) to run out. After a
    // due(), at least past the Redis store's claim (claim_ttl).
    void advance() {
        auto roll = below(100);
        keel::duration step = roll < 60   ? millis(0, 999)
                              : roll < 90 ? millis(1000, 8000)
                                          : millis(10000, 40000);
        if (after_due_) step = std::max<keel::duration>(step, claim_ttl);
        after_due_ = false;
        now_ += step;
    }

    std::optional<instance_snapshot> peek(const std::string& id) const {
        return model_.load_now(id, true);
    }
    // An id of the universe: usually one whose instance matches `prefer`, else usually one
    // that exists, else any.
    template <class P>
    std::string pick_id(P prefer) {
        std::vector<std::string> matching, existing;
        for (auto id : ids) {
            auto s = peek(std::string(id));
            if (s) existing.emplace_back(id);
            if (s && prefer(*s)) matching.emplace_back(id);
        }
        if (!matching.empty() && chance(70)) return matching[below(matching.size())];
        if (!existing.empty() && chance(75)) return existing[below(existing.size())];
        return pick(ids);
    }
    std::string pick_id() {
        return pick_id([](const instance_snapshot&) { return true; });
    }
    // Usually one not started yet; else any (a start of an existing instance changes nothing).
    std::string unstarted_id() {
        std::vector<std::string> fresh;
        for (auto id : ids)
            if (!peek(std::string(id))) fresh.emplace_back(id);
        if (!fresh.empty() && chance(75)) return fresh[below(fresh.size())];
        return pick(ids);
    }

    // The instance's lease now, mostly; else one it had (stale or current) or a made-up one.
    lease_token lease_for(const std::string& id, const std::optional<instance_snapshot>& s) {
        if (s && s->lease && chance(85)) return *s->lease;
        const auto& seen = leases_[id];
        if (!seen.empty() && chance(60)) return seen[below(seen.size())];
        return lease_token{pick(workers), static_cast<std::uint64_t>(between(1, 4))};
    }
    // The journal's length now, mostly; else one off.
    std::uint64_t length_for(const std::optional<instance_snapshot>& s) {
        std::uint64_t length = s ? s->journal.size() : 0;
        if (chance(85)) return length;
        return length > 0 && chance(50) ? length - 1 : length + 1;
    }
    version_refusals refusals() {
        version_refusals refused;
        for (const auto& [definition, version] : definitions)
            if (chance(35)) refused.emplace_back(definition, version);
        return refused;
    }
    nlohmann::json payload() { return nlohmann::json{{"v", below(10)}}; }

    // A step's entry, committed now; a step retried began earlier.
    journal_entry run_entry(std::uint64_t seq) {
        journal_entry e{seq, op_kind::run, pick(steps), nlohmann::json(below(100)), chance(10)};
        e.at = now_;
        e.attempts = chance(80) ? 1 : static_cast<std::uint32_t>(between(2, 3));
        e.started = e.attempts > 1 ? now_ - millis(1, 5000) : now_;
        return e;
    }
    // The entry of a signal taken from the inbox, as the engine journals it.
    journal_entry signal_entry(std::uint64_t seq, const inbox_entry& signal) {
        journal_entry e{seq, op_kind::signal, signal.path,
                        nlohmann::json{{"id", signal.id}, {"payload", signal.payload}}, false};
        e.at = e.started = now_;
        return e;
    }
    std::vector<signal_wait> waits(std::uint64_t first_seq) {
        std::vector<signal_wait> out;
        for (int i = 0, n = between(1, 2); i < n; ++i)
            out.push_back(signal_wait{first_seq + static_cast<std::uint64_t>(i), pick(paths)});
        return out;
    }
    std::vector<timer_record> timers(std::uint64_t first_seq, int most) {
        std::vector<timer_record> out;
        for (int i = 0, n = between(0, most); i < n; ++i)
            out.push_back(timer_record{first_seq + static_cast<std::uint64_t>(i),
                                       now_ + millis(1, 60000), "timer-" + std::to_string(i)});
        return out;
    }

    operation draw_start() {
        start_request req;
        req.id = unstarted_id();
        const auto& [definition, version] = definitions[below(definitions.size())];
        req.definition = definition;
        req.version = version;
        req.params = nlohmann::json{{"n", below(100)}};
        req.worker = pick(workers);
        req.now = now_;
        req.lease_ttl = lease_ttl();
        for (auto topic : topics)
            if (chance(35)) req.subscriptions.emplace_back(topic);
        if (chance(35)) {  // the handler waits before its first step
            start_request::first_wait first;
            for (int i = 0, n = between(0, 2); i < n; ++i) {
                journal_entry e{static_cast<std::uint64_t>(i),
                                i == 0 ? op_kind::now : op_kind::random, "",
                                nlohmann::json(below(1000)), false};
                e.at = e.started = now_;
                first.entries.push_back(e);
            }
            first.timers = timers(10, 2);
            if (chance(80)) first.waits = waits(20);
            first.queued = chance(30);  // waiting for a queue's admission: listed as queued
            req.suspended = std::move(first);
        }
        return start_op{std::move(req)};
    }

    // A signal's sender's trace, or none.
    std::string sender_trace() {
        return chance(50) ? "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" : "";
    }

    operation draw_deliver() {
        return deliver_op{pick_id(), inbox_entry{0, pick(signal_keys), pick(paths), payload(), now_,
                                                 sender_trace()}};
    }

    operation draw_fan_out() {
        fan_out_request req;
        for (int i = 0, n = between(1, 3); i < n; ++i) req.subscriptions.push_back(pick(topics));
        req.signal =
            inbox_entry{0, pick(fan_out_keys), pick(paths), payload(), now_, sender_trace()};
        // Memo windows that outlast the sequence: Redis expires a memo by the wall clock, the
        // memory store by the signals' logical time, so an expiry inside a run would differ.
        req.window = chance(50) ? 1h : 24h;
        if (chance(45))
            req.take = fan_out_request::taker{pick(workers), now_, lease_ttl(),
                                              chance(20) ? refusals() : version_refusals()};
        return fan_out_op{std::move(req)};
    }

    // KNOWN DIVERGENCE, excluded here: the wake index of a suspended instance taken before its
    // time, i.e. whose earliest timer or awaited signal comes after the end of the lease the
    // take grants. Both stores' wake rule (memory_store.cpp and prelude.lua, wake_of) makes it
    // due at that timer or signal, but the Redis store's take (acquire.lua) puts it in the
    // wake index at the lease's end without reading its timers and inbox, so next_due() and
    // due() report it earlier than the memory store does (a hint given early: harmless, but
    // not the rule; reading them would cost every resumption more commands). The engine takes
    // a suspended instance only once it is due, so its lease always ends after its wake time;
    // the sequences here do the same: a grant for such an instance lasts until its wake time
    // at least. (A suspended instance can still be leased before its time otherwise, by a
    // commit that suspends it and keeps the lease: both stores agree there, and on a note of
    // a failed attempt or a renewal that then marks it running, due at its lease's end.)
    static std::optional<keel::time_point> suspended_wake(const instance_snapshot& s) {
        if (s.status != instance_status::suspended) return std::nullopt;
        std::optional<keel::time_point> w;
        for (const auto& t : s.timers)
            if (!w || t.due < *w) w = t.due;
        for (const auto& e : s.inbox)
            for (const auto& sw : s.waits)
                if (sw.path == e.path && (!w || e.at < *w)) w = e.at;
        return w;
    }
    static bool leased_before_its_time(const instance_snapshot& s, keel::time_point lease_end) {
        auto w = suspended_wake(s);
        return w && *w > lease_end;
    }

    acquire_op draw_grant() {
        acquire_op op{pick_id(), pick(workers), now_, lease_ttl(),
                      chance(15) ? refusals() : version_refusals()};
        if (auto s = peek(op.id); s && leased_before_its_time(*s, op.now + op.ttl))
            op.ttl = *suspended_wake(*s) - op.now;  // see suspended_wake
        return op;
    }
    operation draw_acquire() { return draw_grant(); }
    operation draw_take() {
        take_op op{draw_grant(), std::nullopt};
        auto roll = below(100);
        if (roll >= 40) {
            auto s = peek(op.grant.id);
            op.known_length = roll < 80 ? (s ? s->journal.size() : 0) : length_for(s) + 1;
        }
        return op;
    }

    // renew, release, leave, note_attempt: with a lease, usually of a leased instance.
    operation draw_lease_use() {
        auto id = pick_id([](const instance_snapshot& s) { return s.lease.has_value(); });
        auto s = peek(id);
        auto lease = lease_for(id, s);
        auto roll = below(100);
        if (roll < 35) return renew_op{id, lease, now_, lease_ttl()};
        if (roll < 60) return release_op{id, lease};
        if (roll < 75)
            return leave_op{id, lease,
                            departure{lease.worker, pick(std::array{"1", "2", ""}),
                                      pick(std::array{"replay mismatch", "draining"}), now_}};
        std::uint64_t seq = (s ? s->journal.size() : 0) + below(2);
        return note_attempt_op{
            id, lease, step_attempt{seq, pick(steps), between(1, 3), "boom", lease.worker, now_}};
    }

    operation draw_commit() {
        auto id = pick_id([](const instance_snapshot& s) { return s.lease.has_value(); });
        auto s = peek(id);
        commit_request c;
        c.instance = id;
        c.lease = lease_for(id, s);
        c.expected_length = length_for(s);
        c.now = now_;
        std::uint64_t seq = s ? s->journal.size() : 0;
        std::vector<inbox_entry> inbox = s ? s->inbox : std::vector<inbox_entry>();
        std::vector<timer_record> armed = s ? s->timers : std::vector<timer_record>();
        auto consume_one = [&](const std::vector<inbox_entry>& from) {
            if (from.empty()) return;
            const auto& signal = from[below(from.size())];
            c.consume.push_back(signal.id);
            c.entries.push_back(signal_entry(seq++, signal));
        };
        auto roll = below(100);
        if (roll < 35) {  // a step, sometimes with a signal, or an inbox id that is not there
            c.entries.push_back(run_entry(seq++));
            if (chance(40)) consume_one(inbox);
            if (chance(5)) c.consume.push_back(100 + below(3));
        } else if (roll < 55) {  // suspends: a wait set and timers
            if (chance(50)) c.entries.push_back(run_entry(seq++));
            if (chance(20)) consume_one(inbox);
            c.add_timers = timers(seq + 10, 2);
            if (!armed.empty() && chance(30)) c.cancel_timers.push_back(armed.front().seq);
            if (chance(10)) c.cancel_timers.push_back(99);
            c.waits = waits(seq + 20);
            c.status = instance_status::suspended;
            c.release = chance(80);
        } else if (roll < 63) {  // resumes: takes what woke it, drops the wait set
            std::vector<inbox_entry> awaited;
            for (const auto& e : inbox)
                for (const auto& w : s ? s->waits : std::vector<signal_wait>())
                    if (w.path == e.path) awaited.push_back(e);
            consume_one(awaited);
            for (const auto& t : armed) c.cancel_timers.push_back(t.seq);
            c.waits = std::vector<signal_wait>();
            c.status = instance_status::running;
        } else if (roll < 92) {  // ends: completes, fails, parks or is cancelled
            if (chance(50)) c.entries.push_back(run_entry(seq++));
            c.release = chance(50);
            if (roll < 73) {
                c.status = instance_status::completed;
                c.result = nlohmann::json{{"ok", below(10)}};
            } else if (roll < 79) {
                c.status = instance_status::failed;
                c.error = "failed for good";
            } else if (roll < 86) {
                c.status = instance_status::failed;
                c.parked = true;
                c.error = "journal mismatch";
            } else {
                c.status = instance_status::cancelled;
            }
        } else if (roll < 95) {  // continues as new, as the engine sends it
            if (chance(40)) consume_one(inbox);
            if (chance(50)) c.entries.push_back(run_entry(seq++));  // not appended
            c.status = instance_status::running;
            c.waits = std::vector<signal_wait>();
            c.release = true;
            c.restart_params = nlohmann::json{{"n", below(100)}};
        } else {
            mixed_commit(c, seq, inbox, armed);
        }
        if (carries_nothing(c)) c.entries.push_back(run_entry(seq));
        return commit_op{std::move(c)};
    }

    // KNOWN DIVERGENCE, excluded here: a commit that carries nothing (no entry, no change). The
    // memory store records it as the instance's last change (`changed` = its now); the Redis
    // store serves it, for a plainly running instance, as an append of no entries
    // (append.lua), which leaves `changed` alone (for a suspended or parked one it runs the
    // general commit, commit.lua, which sets `changed` as the memory store does). store.hpp
    // defines `changed` as the last write, a transition or the newest entry's time, which such
    // a commit is not: the Redis store's append fits it better, but the contract does not
    // settle it (a commit that writes an unchanged wait set does set `changed` in both). The
    // engine does not send such commits; the sequences here do not either, whatever the
    // instance's status.
    static bool carries_nothing(const commit_request& c) {
        return c.entries.empty() && c.consume.empty() && c.add_timers.empty() &&
               c.cancel_timers.empty() && !c.waits && !c.status && !c.parked && !c.result &&
               !c.error && !c.release;
    }

    // Any combination of the commit's fields, plausible or not.
    void mixed_commit(commit_request& c, std::uint64_t seq, const std::vector<inbox_entry>& inbox,
                      const std::vector<timer_record>& armed) {
        for (int i = 0, n = between(0, 2); i < n; ++i) c.entries.push_back(run_entry(seq++));
        std::set<std::uint64_t> consume;
        for (const auto& e : inbox)
            if (chance(30)) consume.insert(e.id);
        if (chance(10)) consume.insert(1 + below(6));
        c.consume.assign(consume.begin(), consume.end());
        // Sometimes an id listed twice: accepted when it is there, and consumed once.
        if (!c.consume.empty() && chance(10)) c.consume.push_back(c.consume.front());
        if (chance(30)) c.add_timers = timers(seq + 10, 2);
        for (const auto& t : armed)
            if (chance(30)) c.cancel_timers.push_back(t.seq);
        if (chance(40)) c.waits = chance(70) ? waits(seq + 20) : std::vector<signal_wait>();
        if (chance(50)) c.status = static_cast<instance_status>(below(5));
        c.parked = chance(15);
        if (chance(20)) c.result = nlohmann::json(below(10));
        if (chance(20)) c.error = "mixed";
        c.release = chance(50);
    }

    operation draw_due() {
        after_due_ = true;
        if (chance(25)) return due_op{now_, 1 + below(2), {}};  // refusals would skew the count
        return due_op{now_, big_limit, chance(20) ? refusals() : version_refusals()};
    }

    // An operator's retry, usually of a final instance: the signals the dropped entries had
    // consumed go back into the inbox.
    operation draw_rewind() {
        auto id = pick_id([](const instance_snapshot& s) { return is_final(s.status); });
        auto s = peek(id);
        rewind_request r;
        r.instance = id;
        r.expected_length = length_for(s);
        r.now = now_;
        std::uint64_t length = s ? s->journal.size() : 0;
        r.keep = chance(90) ? below(length + 1) : length + 1;
        for (std::uint64_t i = r.keep; s && i < length; ++i) {
            const auto& e = s->journal[i];
            if (e.kind != op_kind::signal || !e.value.contains("id")) continue;
            auto inbox_id = e.value["id"].get<std::uint64_t>();
            auto known = signals_.find({id, inbox_id});
            bool waiting = std::any_of(s->inbox.begin(), s->inbox.end(),
                                       [&](const inbox_entry& x) { return x.id == inbox_id; });
            if (known != signals_.end() && !waiting) r.restore.push_back(known->second);
        }
        if (!r.restore.empty() && chance(30)) {  // the operator leaves one out
            auto left = below(r.restore.size());
            r.left_out.push_back(r.restore[left].id);
            r.restore.erase(r.restore.begin() + static_cast<std::ptrdiff_t>(left));
        }
        return rewind_op{std::move(r)};
    }

    // An operator takes a signal out of an inbox: usually one that is there, of an instance
    // in any state (the refusals are compared too).
    operation draw_remove_signal() {
        auto id = pick_id([](const instance_snapshot& s) { return !s.inbox.empty(); });
        auto s = peek(id);
        std::uint64_t inbox_id = 1 + below(8);
        if (s && !s->inbox.empty() && chance(85)) inbox_id = s->inbox[below(s->inbox.size())].id;
        return remove_signal_op{remove_signal_request{id, inbox_id, now_}};
    }

    // The readers and the workers' announcements.
    operation draw_read() {
        auto roll = below(100);
        if (roll < 25) return draw_list();
        if (roll < 35) return counts_op{};
        if (roll < 60)
            return read_journal_op{pick_id(), chance(60) ? 0 : 1 + below(2),
                                   chance(70) ? 0 : below(3), 1 + below(10)};
        if (roll < 72) return next_due_op{now_};
        if (roll < 87) {
            worker_record self{pick(workers), {}, now_, now_ + millis(5000, 20000)};
            for (std::string_view definition : {"order", "invoice"})
                self.versions.emplace(definition, pick(std::array{"1", "2", ""}));
            return announce_op{std::move(self)};
        }
        if (roll < 95) return workers_op{now_};
        return withdraw_op{pick(workers)};
    }

    // Enqueues, admission rounds (by a worker or none), leaves of one or several entries
    // (admitted, waiting, unknown), and descriptions, on queues with different limits.
    operation draw_queue_call() {
        const auto& q = queues[below(queues.size())];
        auto roll = below(100);
        if (roll < 45) {
            queue_entry e{pick(queued_ids),
                          enqueue_options{pick(partitions), chance(70) ? 0 : between(-2, 2),
                                          chance(70) ? std::string() : pick(dedup_ids)},
                          now_, chance(80) ? pick(workers) : std::string()};
            return enqueue_op{q, std::move(e), chance(50) ? 5s : 30s};
        }
        if (roll < 75)
            return admit_op{q, now_, static_cast<std::size_t>(between(1, 4)), chance(50) ? 5s : 30s,
                            chance(80) ? pick(workers) : std::string()};
        if (roll < 92) {
            leave_queue_op op{q.name, {}};
            for (int i = 0, n = between(1, 3); i < n; ++i) op.instances.push_back(pick(queued_ids));
            return op;
        }
        return describe_queue_op{q.name, static_cast<std::size_t>(between(0, 3))};
    }

    // Permits asked for and given back, a holder sometimes asking again while it holds one.
    operation draw_permit_call() {
        const auto& l = limits[below(limits.size())];
        if (chance(65)) return acquire_permit_op{l, pick(holders), now_};
        return release_permit_op{l.name, pick(holders)};
    }

    operation draw_list() {
        list_query q;
        q.limit = 1 + below(3);
        if (chance(30)) q.definition = std::string(definitions[below(definitions.size())].first);
        if (chance(25)) q.status = static_cast<index_status>(below(index_status_count));
        if (chance(20)) q.prefix = pick(std::array{"order/", "invoice/", "order/o-1"});
        auto span = std::chrono::floor<std::chrono::milliseconds>(now_ - t0).count();
        auto within = [&] { return t0 + std::chrono::milliseconds(below(span + 1)); };
        if (chance(15)) q.since = within();
        if (chance(15)) q.until = within();
        return list_op{std::move(q)};
    }

    std::mt19937_64 rng_;
    const memory_store& model_;
    keel::time_point now_ = t0;
    bool after_due_ = false;
    std::map<std::string, std::vector<lease_token>> leases_;  // every lease each instance had
    std::map<std::pair<std::string, std::uint64_t>, inbox_entry> signals_;  // every signal seen
};

// --- running sequences --------------------------------------------------------------------

constexpr int check_every = 10;

std::optional<std::uint64_t> env_number(const char* name) {
    const char* text = std::getenv(name);
    if (!text || !*text) return std::nullopt;
    return std::stoull(text);
}

// The first operation whose answers differ.
struct divergence {
    std::size_t at = 0;
    std::string memory;
    std::string other;
};

struct failure {
    std::uint64_t seed = 0;
    std::vector<operation> ops;  // up to and including the one that diverged
    divergence found;
};

class store_differential : public ::testing::Test {
  protected:
    store_differential() {
        const char* which = std::getenv("KEEL_PROCESS_STORE");
        on_cluster_ = which && std::string_view(which) == "cluster";
        redis_store_options options{.shards = shards, .claim_ttl = claim_ttl};
        if (on_cluster_) {
            conn_.emplace(keel::test::connect_to_empty_shared_cluster(
                io_, {.wait_replicas = 1, .replica_timeout = 5s}));
        } else {
            server_ = std::make_unique<keel::test::redis_server>();
            conn_.emplace(
                keel::redis::connection::create(io_.get_executor(), {.url = server_->url()})
                    .value());
        }
        redis_.emplace(*conn_, options);
        keel::test::run(io_, redis_->open());
    }

    std::string other_name() const { return on_cluster_ ? "redis cluster" : "redis"; }

    // Redis as new, for the next sequence: one server (or cluster) serves them all.
    void empty_redis() {
        if (on_cluster_) {
            keel::test::shared_redis_cluster().flush_all();
            return;
        }
        auto flushed = keel::test::run(io_, conn_->exec("FLUSHALL"));
        if (!flushed) throw std::runtime_error("FLUSHALL: " + flushed.error().what());
    }

    // Draws and runs one sequence: nullopt when both stores agreed throughout.
    std::optional<failure> run_seed(std::uint64_t seed, int count) {
        memory_store model;
        empty_redis();
        side memory(model, io_), other(*redis_, io_);
        generator gen(seed, model);
        std::vector<operation> ops;
        auto agree = [&](operation op) {
            ops.push_back(std::move(op));
            auto a = memory.perform(ops.back());
            auto b = other.perform(ops.back());
            if (a == b) return true;
            failed_ = failure{seed, ops, divergence{ops.size() - 1, std::move(a), std::move(b)}};
            return false;
        };
        for (int i = 0; i < count; ++i) {
            if (!agree(gen.next())) return std::move(failed_);
            gen.observe();
            if ((i + 1) % check_every == 0 && !agree(gen.check())) return std::move(failed_);
        }
        if (!agree(gen.check())) return std::move(failed_);
        return std::nullopt;
    }

    // Runs given operations on empty stores: the first divergence, if any.
    std::optional<divergence> replay(const std::vector<operation>& ops) {
        memory_store model;
        empty_redis();
        side memory(model, io_), other(*redis_, io_);
        for (std::size_t i = 0; i < ops.size(); ++i) {
            auto a = memory.perform(ops[i]);
            auto b = other.perform(ops[i]);
            if (a != b) return divergence{i, std::move(a), std::move(b)};
        }
        return std::nullopt;
    }

    // Leaves out each operation in turn (the last kept), keeping a removal when the stores still
    // diverge, then cuts at the new divergence; a few passes.
    std::vector<operation> shrink(std::vector<operation> ops, divergence& found) {
        for (int pass = 0; pass < 3; ++pass) {
            bool removed = false;
            for (std::size_t i = ops.size() - 1; i-- > 0;) {
                if (i + 1 >= ops.size()) continue;
                auto fewer = ops;
                fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
                auto d = replay(fewer);
                if (!d) continue;
                fewer.resize(d->at + 1);
                ops = std::move(fewer);
                found = std::move(*d);
                removed = true;
            }
            if (!removed) break;
        }
        return ops;
    }

    std::string rerun_command(std::uint64_t seed) const {
        std::string exe = "keel_process_tests";
        std::error_code ec;
        if (auto self = std::filesystem::read_symlink("/proc/self/exe", ec); !ec)
            exe = self.string();
        auto command = fmt::format("KEEL_DIFF_SEED={}", seed);
        if (on_cluster_) command += " KEEL_PROCESS_STORE=cluster";
        if (auto count = env_number("KEEL_DIFF_OPS"))
            command += fmt::format(" KEEL_DIFF_OPS={}", *count);
        return command + " " + exe + " --gtest_filter='store_differential*'";
    }

    std::string first_difference(const std::string& a, const std::string& b) const {
        std::size_t line = 1, start = 0;
        for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
            if (a[i] != b[i]) break;
            if (a[i] == '\n') ++line, start = i + 1;
        }
        auto line_of = [&](const std::string& s) {
            auto end = s.find('\n', start);
            return start > s.size() ? std::string() : s.substr(start, end - start);
        };
        return fmt::format("first difference, line {}:\n  memory: {}\n  {}: {}\n", line, line_of(a),
                           other_name(), line_of(b));
    }

    std::string sequence(const std::vector<operation>& ops) const {
        std::string out;
        for (std::size_t i = 0; i < ops.size(); ++i)
            out += fmt::format("  #{} {}\n", i, render(ops[i]));
        return out;
    }

    std::string answers(const divergence& d) const {
        return fmt::format("memory answered: {}\n{} answered: {}\n", d.memory, other_name(),
                           d.other) +
               first_difference(d.memory, d.other);
    }

    // The sequence up to the divergence and, when fewer operations diverge too, the shortest
    // such sequence found: both answers in full for the shorter one.
    std::string report(const failure& f) {
        auto out = fmt::format(
            "seed {}: the memory store and the {} store diverge at operation #{}.\nrerun: {}\n"
            "operations:\n{}",
            f.seed, other_name(), f.found.at, rerun_command(f.seed), sequence(f.ops));
        auto found = f.found;
        auto fewer = shrink(f.ops, found);
        if (fewer.size() == f.ops.size()) return out + answers(f.found);
        out += first_difference(f.found.memory, f.found.other);
        return out + fmt::format("\nshrunk to {} of those operations:\n{}{}", fewer.size(),
                                 sequence(fewer), answers(found));
    }

    asio::io_context io_;
    bool on_cluster_ = false;
    std::unique_ptr<keel::test::redis_server> server_;
    std::optional<keel::redis::connection> conn_;
    std::optional<redis_store> redis_;
    failure failed_;
};

TEST(store_differential_universe, covers_every_shard) {
    std::set<std::size_t> used;
    for (auto id : ids) used.insert(shard_of(id, shards));
    EXPECT_EQ(used.size(), shards);
}

TEST_F(store_differential, random_sequences_answer_as_the_memory_store_does) {
    auto count = static_cast<int>(env_number("KEEL_DIFF_OPS").value_or(60));
    std::vector<std::uint64_t> seeds;
    if (auto one = env_number("KEEL_DIFF_SEED")) {
        seeds.push_back(*one);
    } else {
        auto n = env_number("KEEL_DIFF_SEEDS").value_or(on_cluster_ ? 20 : 200);
        for (std::uint64_t seed = 1; seed <= n; ++seed) seeds.push_back(seed);
    }
    std::vector<failure> failures;
    for (auto seed : seeds)
        if (auto f = run_seed(seed, count)) failures.push_back(std::move(*f));
    if (failures.empty()) return;
    // The seed that diverges first in full; the others by number.
    auto shortest =
        std::min_element(failures.begin(), failures.end(),
                         [](const auto& a, const auto& b) { return a.found.at < b.found.at; });
    std::string others;
    for (const auto& f : failures)
        if (&f != &*shortest) others += fmt::format(" {} (at #{})", f.seed, f.found.at);
    ADD_FAILURE() << failures.size() << " of " << seeds.size() << " seeds diverge"
                  << (others.empty() ? "" : "; besides the one below:" + others) << "\n"
                  << report(*shortest);
}

}  // namespace
