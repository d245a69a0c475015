#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <cmath>
#include <keel/framework/concurrency/nursery.hpp>
#include <keel/framework/log.hpp>
#include <keel/process/redis_store.hpp>
#include <map>
#include <random>
#include <set>

#include "json_text.hpp"
#include "listing.hpp"
#include "lua_prelude.hpp"
#include "lua_scripts.hpp"
#include "script_calls.hpp"

namespace keel::process {
namespace {

// --- Lua -------------------------------------------------------------------------------
// The scripts are in src/lua/ (each file documents its KEYS and reply; its ARGV are declared
// in script_calls.hpp), embedded at build time. Every script but load, changed, announce and
// shards starts with the helpers it uses of the prelude: final.lua, then prelude.lua
// (lua_prelude.hpp: only those its text names); then come its arguments by name.

namespace scripts = detail::scripts;

// The prelude as a script on one Redis server runs it, or on Redis Cluster, where a script
// checks that the keys it builds are on the node before it writes (prelude.lua, `here`).
const std::string& prelude(bool on_cluster) {
    static const std::string one_server =
        std::string(detail::lua("final.lua")) + std::string(detail::lua("prelude.lua"));
    static const std::string cluster = [] {
        std::string text = one_server;
        constexpr std::string_view flag = "local on_cluster = false\n";
        auto at = text.find(flag);
        if (at == std::string::npos) throw std::logic_error("prelude.lua: no on_cluster flag");
        text.replace(at, flag.size(), "local on_cluster = true\n");
        return text;
    }();
    return on_cluster ? cluster : one_server;
}

}  // namespace

// A script that takes `Args` (script_calls.hpp): redis_store::call sends no other.
template <class Args>
struct detail::script_call {
    redis::script script;
};

// Every script of the store, built once for one server and once for Redis Cluster.
struct detail::store_scripts {
    explicit store_scripts(bool cluster) : on_cluster(cluster) {}

    template <class Args>
    script_call<Args> with_prelude() const {
        auto body = detail::lua(Args::file);
        return {redis::script(detail::prelude_for(prelude(on_cluster), body) +
                              scripts::lua_arguments<Args>() + std::string(body))};
    }
    template <class Args>
    static script_call<Args> alone() {
        return {
            redis::script(scripts::lua_arguments<Args>() + std::string(detail::lua(Args::file)))};
    }

    const bool on_cluster;
    script_call<scripts::start_args> start = with_prelude<scripts::start_args>();
    script_call<scripts::load_args> load = alone<scripts::load_args>();
    script_call<scripts::commit_args> commit = with_prelude<scripts::commit_args>();
    script_call<scripts::append_args> append = with_prelude<scripts::append_args>();
    script_call<scripts::deliver_args> deliver = with_prelude<scripts::deliver_args>();
    script_call<scripts::fan_out_args> fan_out = with_prelude<scripts::fan_out_args>();
    script_call<scripts::acquire_args> acquire = with_prelude<scripts::acquire_args>();
    script_call<scripts::renew_args> renew = with_prelude<scripts::renew_args>();
    script_call<scripts::release_args> release = with_prelude<scripts::release_args>();
    script_call<scripts::claim_args> claim = with_prelude<scripts::claim_args>();
    script_call<scripts::rewind_args> rewind = with_prelude<scripts::rewind_args>();
    script_call<scripts::remove_signal_args> remove_signal =
        with_prelude<scripts::remove_signal_args>();
    script_call<scripts::list_args> list = with_prelude<scripts::list_args>();
    script_call<scripts::counts_args> counts = with_prelude<scripts::counts_args>();
    script_call<scripts::changed_args> changed = alone<scripts::changed_args>();
    script_call<scripts::note_attempt_args> note_attempt =
        with_prelude<scripts::note_attempt_args>();
    script_call<scripts::announce_args> announce = alone<scripts::announce_args>();
    script_call<scripts::shards_args> shards = alone<scripts::shards_args>();
    script_call<scripts::identity_args> identity = alone<scripts::identity_args>();
    script_call<scripts::permit_args> permit = alone<scripts::permit_args>();
    script_call<scripts::queue_args> queue = alone<scripts::queue_args>();
};

namespace {

const detail::store_scripts& scripts_for(bool on_cluster) {
    static const detail::store_scripts one_server(false), cluster(true);
    return on_cluster ? cluster : one_server;
}

// --- encoding ---------------------------------------------------------------------------

// Due times and lease expiries round up, "now" rounds down: nothing fires early.
std::int64_t ms_ceil(time_point t) {
    return std::chrono::ceil<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
std::int64_t ms_floor(time_point t) {
    return std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
std::int64_t ms_ceil(duration d) {
    return std::chrono::ceil<std::chrono::milliseconds>(d).count();
}
time_point from_ms(std::int64_t ms) {
    return time_point(std::chrono::milliseconds(ms));
}

// The retry log: a JSON array of [from, at ms, journal length] (as strings or numbers), and a
// fourth element when signals were left out: their inbox ids, comma-separated.
std::vector<std::uint64_t> parse_id_list(const std::string& text) {
    std::vector<std::uint64_t> out;
    for (std::size_t at = 0; at < text.size();) {
        auto comma = std::min(text.find(',', at), text.size());
        out.push_back(std::stoull(text.substr(at, comma - at)));
        at = comma + 1;
    }
    return out;
}
std::vector<retry_record> parse_retry_log(std::string_view text) {
    auto number = [](const nlohmann::json& j) -> std::int64_t {
        return j.is_string() ? std::stoll(j.get<std::string>()) : j.get<std::int64_t>();
    };
    std::vector<retry_record> out;
    for (const auto& r : nlohmann::json::parse(text)) {
        auto& record = out.emplace_back(retry_record{static_cast<std::uint64_t>(number(r.at(0))),
                                                     from_ms(number(r.at(1))),
                                                     static_cast<std::uint64_t>(number(r.at(2)))});
        if (r.size() > 3 && r[3].is_string()) record.left_out = parse_id_list(r[3]);
    }
    return out;
}
std::string id_list(const std::vector<std::uint64_t>& ids) {
    std::string out;
    for (auto id : ids) {
        if (!out.empty()) out += ',';
        out += std::to_string(id);
    }
    return out;
}

// The removed log (remove_signal.lua): a JSON array of {"id", "removed" (ms), "signal"}.
std::vector<removed_signal> parse_removed_log(std::string_view text) {
    std::vector<removed_signal> out;
    for (const auto& r : nlohmann::json::parse(text)) {
        auto id = r.at("id").get<std::uint64_t>();
        out.push_back(removed_signal{detail::parse_signal_text(id, r.at("signal").dump()),
                                     from_ms(r.at("removed").get<std::int64_t>())});
    }
    return out;
}

// A step's failed attempt in the meta hash: field "attempt:<seq>", value attempt_json's.
constexpr std::string_view attempt_prefix = "attempt:";
constexpr std::string_view published_prefix = "published:";
std::string attempt_json(const step_attempt& a) {
    return nlohmann::json{{"name", a.name},
                          {"attempt", a.attempt},
                          {"error", a.error},
                          {"worker", a.worker},
                          {"at", ms_floor(a.at)}}
        .dump();
}

std::string_view view_of(const redis::reply& r) {
    return r.text().value_or(std::string_view());
}

std::string text_of(const redis::reply& r) {
    return std::string(view_of(r));
}

using field = std::pair<std::string_view, std::string_view>;

// A hash as HGETALL gives it: its (field, value) pairs, seen in place in the reply, in the
// reply's order.
std::vector<field> fields_of(const redis::reply& r) {
    auto e = r.elements();
    std::vector<field> out;
    out.reserve(e.size() / 2);
    for (std::size_t i = 0; i + 1 < e.size(); i += 2)
        out.emplace_back(view_of(e[i]), view_of(e[i + 1]));
    return out;
}

// The meta hash's fields an instance is read from, seen in place in HGETALL's reply (or in a
// take's list of the fields as they were), in one pass: "" for a field that is absent.
struct instance_meta {
    std::string_view id, definition, version, parent, trace, params, status, parked, waits,
        lease_worker, lease_epoch, lease_expires, created, changed, retry_log, removed_log, left;
    std::optional<std::string_view> result, error;
    std::vector<field> attempts;   // "attempt:<seq>", in the reply's order
    std::vector<field> published;  // "published:<name>"

    explicit instance_meta(const redis::reply& r) {
        auto e = r.elements();
        for (std::size_t i = 0; i + 1 < e.size(); i += 2) keep(view_of(e[i]), view_of(e[i + 1]));
    }

  private:
    using member = std::string_view instance_meta::*;
    static constexpr std::pair<std::string_view, member> named[] = {
        {"id", &instance_meta::id},
        {"definition", &instance_meta::definition},
        {"version", &instance_meta::version},
        {"parent", &instance_meta::parent},
        {"trace", &instance_meta::trace},
        {"params", &instance_meta::params},
        {"status", &instance_meta::status},
        {"parked", &instance_meta::parked},
        {"waits", &instance_meta::waits},
        {"lease_worker", &instance_meta::lease_worker},
        {"lease_epoch", &instance_meta::lease_epoch},
        {"lease_expires", &instance_meta::lease_expires},
        {"created", &instance_meta::created},
        {"changed", &instance_meta::changed},
        {"retry_log", &instance_meta::retry_log},
        {"removed_log", &instance_meta::removed_log},
        {"left", &instance_meta::left},
    };

    void keep(std::string_view name, std::string_view value) {
        for (const auto& [known, to] : named) {
            if (name == known) {
                this->*to = value;
                return;
            }
        }
        if (name == "result")
            result = value;
        else if (name == "error")
            error = value;
        else if (name.starts_with(attempt_prefix))
            attempts.emplace_back(name, value);
        else if (name.starts_with(published_prefix))
            published.emplace_back(name.substr(published_prefix.size()), value);
    }
};

// An integer field ("": 0); what follows the digits is ignored, as std::stoll does.
std::int64_t to_int(std::string_view s) {
    if (s.empty()) return 0;
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc()) throw std::invalid_argument("not an integer: " + std::string(s));
    return n;
}

std::uint64_t to_count(std::string_view s) {
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc()) throw std::invalid_argument("not a count: " + std::string(s));
    return n;
}

// The attempts of steps still in flight: those at or past the journal's end, by seq.
std::vector<step_attempt> parse_attempts(const instance_meta& meta, std::uint64_t journal_length) {
    std::vector<step_attempt> out;
    for (const auto& [name, text] : meta.attempts) {
        auto seq = to_count(name.substr(attempt_prefix.size()));
        if (seq < journal_length) continue;
        auto j = nlohmann::json::parse(text);
        out.push_back(step_attempt{seq, j.at("name").get<std::string>(), j.at("attempt").get<int>(),
                                   j.at("error").get<std::string>(),
                                   j.at("worker").get<std::string>(),
                                   from_ms(j.at("at").get<std::int64_t>())});
    }
    std::sort(out.begin(), out.end(),
              [](const step_attempt& a, const step_attempt& b) { return a.seq < b.seq; });
    return out;
}

std::optional<store_error> parse_store_error(std::string_view code) {
    if (code == "not_found") return store_error::not_found;
    if (code == "fenced") return store_error::fenced;
    if (code == "conflict") return store_error::conflict;
    if (code == "inbox_missing") return store_error::inbox_missing;
    if (code == "finished") return store_error::finished;
    if (code == "busy") return store_error::busy;
    if (code == "wrong_state") return store_error::wrong_state;
    if (code == "out_of_range") return store_error::out_of_range;
    if (code == "declined") return store_error::declined;
    if (code == "document_changed") return store_error::document_changed;
    return std::nullopt;
}

std::string decimal(std::integral auto n) {
    return std::to_string(n);
}

scripts::refusals refusals_of(const version_refusals& refused) {
    scripts::refusals out;
    for (const auto& [definition, version] : refused) out.add(definition + "\n" + version);
    return out;
}

scripts::timers timers_of(const std::vector<timer_record>& timers) {
    scripts::timers out;
    for (const auto& t : timers) out.add(decimal(t.seq), decimal(ms_ceil(t.due)), t.name);
    return out;
}

// A commit's document writes (prelude.lua, documents_as_expected): a document's key and its
// lock's after the other keys, and per document its expectation and new text.
scripts::documents documents_of(std::vector<std::string>& keys,
                                const std::vector<document_write>& documents) {
    scripts::documents out;
    for (const auto& d : documents) {
        keys.push_back(d.key);
        keys.push_back(d.lock);
        out.add(d.expected ? "1" : "0", d.expected.value_or(std::string()), d.text);
    }
    return out;
}

// Journal entries as the scripts append them: one JSON text each.
scripts::list<1> entries_of(const std::vector<journal_entry>& entries) {
    scripts::list<1> out;
    out.slots.reserve(entries.size());
    for (const auto& e : entries) out.add(detail::journal_text(e));
    return out;
}

std::string departure_json(const departure& d) {
    return nlohmann::json{
        {"worker", d.worker}, {"version", d.version}, {"reason", d.reason}, {"at", ms_floor(d.at)}}
        .dump();
}
departure parse_departure(std::string_view text) {
    auto j = nlohmann::json::parse(text);
    return departure{j.value("worker", ""), j.value("version", ""), j.value("reason", ""),
                     from_ms(j.value("at", std::int64_t{0}))};
}

// Level 0 is written as a build before the levels wrote it: without the member.
std::string worker_json(const worker_record& w) {
    nlohmann::json j{{"worker", w.worker},
                     {"versions", w.versions},
                     {"seen", ms_floor(w.seen)},
                     {"expires", ms_ceil(w.expires)}};
    if (w.level > 0) j["level"] = w.level;
    return j.dump();
}
worker_record parse_worker(const std::string& text) {
    auto j = nlohmann::json::parse(text);
    worker_record w;
    w.worker = j.value("worker", "");
    if (auto versions = j.find("versions"); versions != j.end() && versions->is_object())
        for (const auto& [definition, version] : versions->items())
            w.versions.emplace(definition, version.get<std::string>());
    w.seen = from_ms(j.value("seen", std::int64_t{0}));
    w.expires = from_ms(j.value("expires", std::int64_t{0}));
    w.level = j.value("level", std::uint32_t{0});
    return w;
}

}  // namespace

redis_store::redis_store(redis::connection& connection, redis_store_options options)
    : redis_(connection),
      options_(std::move(options)),
      scripts_(scripts_for(connection.is_cluster())) {
    if (options_.shards > max_shards)
        throw std::invalid_argument(
            fmt::format("redis_store: shards must be 0 (the store's) or from 1 to {}", max_shards));
    if (options_.shards != 0) use_shards(options_.shards);
    const auto& all = scripts_;
    for (const auto* s : {&all.start.script,         &all.load.script,    &all.commit.script,
                          &all.append.script,        &all.deliver.script, &all.fan_out.script,
                          &all.acquire.script,       &all.renew.script,   &all.release.script,
                          &all.claim.script,         &all.rewind.script,  &all.list.script,
                          &all.counts.script,        &all.changed.script, &all.note_attempt.script,
                          &all.announce.script,      &all.shards.script,  &all.identity.script,
                          &all.remove_signal.script, &all.permit.script,  &all.queue.script})
        redis_.add_script(*s);
}

namespace {
// "<prefix>:{<shard>}:", how every key of a shard starts.
std::string shard_prefix(std::string_view prefix, std::size_t shard) {
    return fmt::format("{}:{{{}}}:", prefix, shard);
}

// The shard counts of the store's record (shards.lua): a new store's on one server and on
// Redis Cluster, and the one Keel used before it recorded the count.
constexpr std::size_t new_store_shards = 1;
constexpr std::size_t new_cluster_store_shards = 16;
constexpr std::size_t unrecorded_shards = 16;
}  // namespace

void redis_store::use_shards(std::size_t count) {
    shard_prefixes_.reserve(count);
    for (std::size_t shard = 0; shard < count; ++shard)
        shard_prefixes_.push_back(shard_prefix(options_.prefix, shard));
    shards_ = count;
}

std::optional<std::size_t> redis_store::opened_count() const {
    switch (state_.load(std::memory_order_acquire)) {
        case store_state::open:
            return shards_;
        case store_state::refused:
            throw_not_open(store_state::refused);
        case store_state::closed:
            break;
    }
    return std::nullopt;
}

asio::awaitable<std::size_t> redis_store::open() {
    if (auto count = opened_count()) co_return *count;
    std::vector<std::string> keys{options_.prefix + ":shards"};
    // On a cluster the other keys would be in other slots; a new store there gets the count
    // that earlier builds used anyway.
    if (!redis_.is_cluster()) {
        keys.push_back(workers_key());
        for (std::size_t shard = 0; shard < unrecorded_shards; ++shard)
            for (std::string_view index : {"idx:defs", "idx:counts"})
                keys.push_back(shard_prefix(options_.prefix, shard).append(index));
    }
    auto args = scripts::argv(scripts::shards_args{
        .configured = options_.shards == 0 ? std::string() : decimal(options_.shards),
        .new_store = decimal(redis_.is_cluster() ? new_cluster_store_shards : new_store_shards),
        .before_record = decimal(unrecorded_shards)});
    auto r = co_await redis_.eval(scripts_.shards.script, keys, args);
    if (!r) throw store_unavailable("process store: " + r.error().what());
    auto text = text_of(*r);
    std::size_t recorded = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), recorded);
    std::lock_guard lock(open_mutex_);  // two opens at once: the first to get here decides
    if (auto count = opened_count()) co_return *count;
    if (ec != std::errc() || end != text.data() + text.size() || recorded == 0 ||
        recorded > max_shards)
        refusal_ = fmt::format("process store: {} holds \"{}\", not a shard count", keys[0], text);
    else if (options_.shards != 0 && recorded != options_.shards)
        refusal_ = fmt::format(
            "process store: the store at prefix \"{}\" has {} shards, but this service is "
            "configured with {}; a store's shard count cannot change (leave the option at 0 to "
            "use the store's)",
            options_.prefix, recorded, options_.shards);
    if (!refusal_.empty()) {
        state_.store(store_state::refused, std::memory_order_release);
        throw store_refused(refusal_);
    }
    if (options_.shards == 0) use_shards(recorded);
    state_.store(store_state::open, std::memory_order_release);
    co_return shards_;
}

asio::awaitable<void> redis_store::prepare() {
    co_await open();
}

std::string_view redis_store::not_open_reason() const {
    return not_open_reason(state_.load(std::memory_order_acquire));
}

std::string_view redis_store::not_open_reason(store_state state) const {
    switch (state) {
        case store_state::open:
            return {};
        case store_state::refused:
            return refusal_;  // written before the state, never after
        case store_state::closed:
            break;
    }
    return "process store: not open yet (Redis has not answered redis_store::open(); a "
           "service opens its store when Redis first answers)";
}

void redis_store::throw_not_open(store_state state) const {
    if (state == store_state::refused) throw store_refused(refusal_);
    throw store_unavailable(std::string(not_open_reason(state)));
}

redis::connection& redis_store::ready() const {
    if (auto state = state_.load(std::memory_order_acquire); state != store_state::open)
        throw_not_open(state);
    return redis_;
}

std::size_t redis_store::shards() const {
    auto state = state_.load(std::memory_order_acquire);
    if (state == store_state::open) return shards_;
    if (options_.shards == 0 || state == store_state::refused) throw_not_open(state);
    return options_.shards;  // known before the store is open: configured
}

std::size_t redis_store::shard_of(std::string_view id) const {
    return process::shard_of(id, shards());
}

std::string redis_store::shard_key(std::size_t shard, std::string_view suffix) const {
    std::string key;
    const auto& prefix = shard_prefixes_.at(shard);  // throws before the store is open
    key.reserve(prefix.size() + suffix.size());
    key += prefix;
    key += suffix;
    return key;
}

std::string redis_store::wake_key(std::size_t shard) const {
    return shard_key(shard, "wake");
}

std::string redis_store::subscription_key(std::size_t shard, std::string_view key) const {
    std::string out;
    const auto& prefix = shard_prefixes_.at(shard);
    out.reserve(prefix.size() + 4 + key.size());
    out += prefix;
    out += "sub:";
    out += key;
    return out;
}

std::string redis_store::instance_prefix(std::size_t shard) const {
    return shard_key(shard, "i:");
}

std::string redis_store::key(std::string_view id, std::string_view suffix) const {
    const auto& prefix = shard_prefixes_[shard_of(id)];
    std::string key;
    key.reserve(prefix.size() + id.size() + suffix.size() + 3);
    key += prefix;
    key += "i:";
    key += id;
    key += ':';
    key += suffix;
    return key;
}

namespace {

// On Redis Cluster, a script that reaches keys it was not given (the fan-out and claims find
// instances through an index; commits, starts and rewinds write the operators' index) fails
// with this error while its slot is being migrated and such a key is not on the node. Every
// script checks those keys before its first write (prelude.lua, `here`), so a refused script
// wrote nothing and is sent again until the migration ends (one slot's keys move in
// milliseconds to seconds).
bool slot_in_migration(const redis::error& e) {
    return e.code == redis::errc::server_error &&
           e.message.find("access a non local key") != std::string::npos;
}
constexpr auto migration_patience = std::chrono::seconds(10);

// Redis refused a script for a reason that waiting may cure (a failover, a load, a full
// memory, a busy script, a cluster moving slots), or for one it will not: a key of another
// type (WRONGTYPE), a script's own runtime error (ERR). Both answer 503, but the connection,
// which logs outages, sees a healthy server, so the second kind is logged here as an error,
// at most once every 10 s in a process (with how many were not logged).
bool waiting_may_cure(const redis::error& e) {
    if (e.code != redis::errc::server_error) return true;
    static constexpr std::array<std::string_view, 9> transient{
        "LOADING", "BUSY",       "READONLY",    "MASTERDOWN", "TRYAGAIN",
        "OOM",     "NOREPLICAS", "CLUSTERDOWN", "MISCONF"};
    return std::find(transient.begin(), transient.end(), e.server_code()) != transient.end();
}
std::atomic<std::int64_t> next_fault_log{0};  // steady_clock, ns
std::atomic<std::uint64_t> faults_unlogged{0};
void log_fault(const redis::error& e) {
    using std::chrono::nanoseconds;
    const auto now =
        std::chrono::duration_cast<nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    auto next = next_fault_log.load(std::memory_order_relaxed);
    if (now < next || !next_fault_log.compare_exchange_strong(
                          next, now + nanoseconds(std::chrono::seconds(10)).count())) {
        faults_unlogged.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    log::logger("process").error(
        "process store: Redis refused a script with an error that waiting will not cure: {} "
        "(answered 503; {} more since the last such line)",
        e.message, faults_unlogged.exchange(0, std::memory_order_relaxed));
}

}  // namespace

asio::awaitable<redis::reply> redis_store::run(const redis::script& s,
                                               std::vector<std::string> keys,
                                               std::vector<std::string> args, replication after) {
    auto r = co_await ready().eval(s, keys, args);
    if (!r && slot_in_migration(r.error())) {
        auto give_up = std::chrono::steady_clock::now() + migration_patience;
        auto pause = std::chrono::milliseconds(5);
        asio::steady_timer timer(co_await asio::this_coro::executor);
        while (!r && slot_in_migration(r.error()) && std::chrono::steady_clock::now() < give_up) {
            timer.expires_after(pause);
            co_await timer.async_wait(asio::use_awaitable);
            pause = std::min(pause * 2, std::chrono::milliseconds(250));
            r = co_await ready().eval(s, keys, args);
        }
    }
    if (!r) {
        if (!waiting_may_cure(r.error())) log_fault(r.error());
        throw store_unavailable("process store: " + r.error().what());
    }
    if (after == replication::wait) {
        auto replicated = co_await ready().replicate(keys.front(), *r);
        if (!replicated)
            throw store_unavailable("process store: " + replicated.error().what() +
                                    " (the change is on the primary only)");
    }
    co_return std::move(*r);
}

template <class Args>
asio::awaitable<redis::reply> redis_store::call(const detail::script_call<Args>& s,
                                                std::vector<std::string> keys, Args args,
                                                replication after) {
    return run(s.script, std::move(keys), scripts::argv(std::move(args)), after);
}

namespace {
// The keys every instance script receives, in the prelude's order: one hash of the id and
// one formatted prefix.
std::vector<std::string> instance_keys(const redis_store& st, std::string_view id) {
    auto base = st.key(id, "");
    std::vector<std::string> keys;
    keys.reserve(8);
    for (std::string_view suffix :
         {"meta", "journal", "inbox", "inbox_idx", "keys", "timers", "commits"}) {
        auto& k = keys.emplace_back();
        k.reserve(base.size() + suffix.size());  // one allocation, not a copy and a growth
        k.append(base).append(suffix);
    }
    keys.push_back(st.wake_key(st.shard_of(id)));
    return keys;
}
}  // namespace

asio::awaitable<start_result> redis_store::start(start_request req) {
    if (!req.documents.empty() && redis_.is_cluster())  // see writes_documents()
        throw std::logic_error("process store: a start on a cluster cannot write entity documents");
    auto keys = instance_keys(*this, req.id);
    scripts::start_args args{.id = req.id,
                             .definition = req.definition,
                             .params = dump_json(req.params),
                             .worker = req.worker,
                             .now = decimal(ms_floor(req.now)),
                             .lease_expires = decimal(ms_ceil(req.now + req.lease_ttl)),
                             .version = req.version,
                             .parent = req.parent,
                             .trace = req.trace,
                             .subscriptions = {std::move(req.subscriptions)},
                             .compact_subscriptions = req.compact_subscriptions,
                             .documents = documents_of(keys, req.documents)};
    if (req.suspended) {
        const auto& first = *req.suspended;
        args.suspended = true;
        args.queued = first.queued;
        args.waits = detail::waits_text(first.waits);
        args.timers = timers_of(first.timers);
        args.entries = entries_of(first.entries);
    } else {
        args.entries = entries_of(req.entries);
    }
    auto r = co_await call(scripts_.start, std::move(keys), std::move(args), replication::wait);
    auto e = r.elements();
    start_result out;
    if (e[0].integer().value_or(0) == -1) {
        out.documents_changed = true;
        co_return out;
    }
    out.created = e[0].integer().value_or(0) == 1;
    out.status = parse_instance_status(text_of(e[1])).value_or(instance_status::running);
    if (out.created && !req.suspended) out.lease = lease_token{req.worker, 1};
    co_return out;
}

namespace {

// An instance from the parts load.lua returns (and acquire.lua with a load): meta, journal,
// inbox and timers as replies, and the journal's length.
instance_snapshot parse_instance(std::span<const redis::reply> parts, std::uint64_t length,
                                 bool journal) {
    instance_meta meta(parts[0]);
    instance_snapshot s;
    s.id = meta.id;
    s.definition = meta.definition;
    s.version = meta.version;
    s.parent = meta.parent;
    s.trace = meta.trace;
    if (!meta.params.empty())  // not in a fan-out's take
        s.params = nlohmann::json::parse(meta.params);
    s.status = parse_instance_status(meta.status).value_or(instance_status::running);
    s.parked = meta.parked == "1";
    if (meta.result) s.result = nlohmann::json::parse(*meta.result);
    if (meta.error) s.error = *meta.error;
    for (const auto& entry : parts[1].elements()) {
        if (entry.is_nil()) continue;
        s.journal.push_back(detail::parse_journal_text(view_of(entry)));
    }
    for (const auto& [inbox_id, text] : fields_of(parts[2]))
        s.inbox.push_back(detail::parse_signal_text(to_count(inbox_id), text));
    std::sort(s.inbox.begin(), s.inbox.end(),
              [](const inbox_entry& a, const inbox_entry& b) { return a.id < b.id; });
    for (const auto& [seq, value] : fields_of(parts[3])) {
        auto space = value.find(' ');
        s.timers.push_back(timer_record{
            to_count(seq), from_ms(to_int(value.substr(0, space))),
            std::string(space == std::string_view::npos ? "" : value.substr(space + 1))});
    }
    std::sort(s.timers.begin(), s.timers.end(),
              [](const timer_record& a, const timer_record& b) { return a.seq < b.seq; });
    s.waits = detail::parse_waits_text(meta.waits.empty() ? "[]" : meta.waits);
    if (!meta.lease_worker.empty())
        s.lease = lease_token{std::string(meta.lease_worker),
                              static_cast<std::uint64_t>(to_int(meta.lease_epoch))};
    s.lease_expires = from_ms(to_int(meta.lease_expires));
    s.created = from_ms(to_int(meta.created));
    s.changed = from_ms(to_int(meta.changed));
    if (!s.journal.empty()) s.changed = std::max(s.changed, s.journal.back().at);
    if (!journal) s.journal.clear();
    if (!meta.retry_log.empty()) s.retries = parse_retry_log(meta.retry_log);
    if (!meta.removed_log.empty()) s.removed = parse_removed_log(meta.removed_log);
    if (!meta.left.empty()) s.left = parse_departure(meta.left);
    if (s.status == instance_status::running) s.attempts = parse_attempts(meta, length);
    for (const auto& [name, text] : meta.published)
        s.published.emplace(std::string(name), nlohmann::json::parse(text));
    return s;
}

lease_grant parse_grant(std::span<const redis::reply> e, std::string worker) {
    lease_grant g;
    g.lease =
        lease_token{std::move(worker), static_cast<std::uint64_t>(e[1].integer().value_or(0))};
    g.journal_length = static_cast<std::uint64_t>(e[2].integer().value_or(0));
    g.status = parse_instance_status(text_of(e[3])).value_or(instance_status::running);
    g.expires = from_ms(e[4].integer().value_or(0));
    g.taken_over = e.size() > 5 && e[5].integer().value_or(0) == 1;
    return g;
}

// acquire.lua's reply with the instance. The journal is in it unless the caller holds
// `known_length` entries of it; fan_out.lua's take never sends it.
enum class journal_sent { unless_known, never };
taken_instance parse_taken(std::span<const redis::reply> e, std::string worker,
                           std::optional<std::uint64_t> known_length,
                           journal_sent sent = journal_sent::unless_known) {
    taken_instance out;
    out.grant = parse_grant(e, std::move(worker));
    out.with_journal = sent == journal_sent::unless_known &&
                       (!known_length || *known_length != out.grant.journal_length);
    out.snapshot = parse_instance(e.subspan(6), out.grant.journal_length, out.with_journal);
    out.resumed = e.size() > 10 && e[10].integer().value_or(0) == 1;
    return out;
}

}  // namespace

asio::awaitable<std::optional<instance_snapshot>> redis_store::load(std::string id, bool journal) {
    scripts::load_args args{.journal = journal};
    auto r = co_await call(scripts_.load, instance_keys(*this, id), args);
    if (r.is_nil()) co_return std::nullopt;
    auto parts = r.elements();
    co_return parse_instance(parts, static_cast<std::uint64_t>(parts[4].integer().value_or(0)),
                             journal);
}

bool redis_store::writes_documents(const document_address& where) const {
    return where.redis == &redis_ && !redis_.is_cluster();
}

namespace {
// A commit that only appends journal entries: the append script serves it.
bool appends_only(const commit_request& req) {
    return !req.status && !req.waits && !req.parked && !req.result && !req.error && !req.release &&
           req.consume.empty() && req.add_timers.empty() && req.cancel_timers.empty() &&
           req.published.empty() && !req.restart_params;
}
}  // namespace

asio::awaitable<std::optional<expected<commit_result, store_error>>> redis_store::append(
    const commit_request& req) {
    std::vector<std::string> keys{key(req.instance, "meta"), key(req.instance, "journal"),
                                  key(req.instance, "commits")};
    scripts::append_args args{.worker = req.lease.worker,
                              .epoch = decimal(req.lease.epoch),
                              .expected_length = decimal(req.expected_length),
                              .audit = options_.audit_commits,
                              .documents = documents_of(keys, req.documents),
                              .entries = entries_of(req.entries)};
    auto r = co_await call(scripts_.append, std::move(keys), std::move(args), replication::wait);
    auto code = text_of(r);
    if (code == "ok") co_return commit_result{};
    if (code == "general") co_return std::nullopt;
    if (auto e = parse_store_error(code)) co_return unexpected(*e);
    throw store_unavailable("process store: unexpected append reply " + r.to_debug_string());
}

asio::awaitable<expected<commit_result, store_error>> redis_store::commit(commit_request req) {
    if (!req.documents.empty() && redis_.is_cluster())  // see writes_documents()
        throw std::logic_error(
            "process store: a commit on a cluster cannot write entity documents");
    if (appends_only(req)) {
        auto done = co_await append(req);
        if (done) co_return std::move(*done);
    }
    auto keys = instance_keys(*this, req.instance);
    scripts::commit_args args{
        .id = req.instance,
        .worker = req.lease.worker,
        .epoch = decimal(req.lease.epoch),
        .expected_length = decimal(req.expected_length),
        .status = req.status ? std::string(to_string(*req.status)) : std::string(),
        .parked = req.parked,
        .has_error = req.error.has_value(),
        .error = req.error.value_or(std::string()),
        .has_result = req.result.has_value(),
        .result = req.result ? req.result->dump() : std::string(),
        .release = req.release,
        .audit = options_.audit_commits,
        .retention = decimal(ms_ceil(options_.retention)),
        .has_waits = req.waits.has_value(),
        .waits = req.waits ? detail::waits_text(*req.waits) : std::string(),
        .now = decimal(ms_floor(req.now)),
        .documents = documents_of(keys, req.documents),
        .consume = {},
        .cancel_timers = {},
        .timers = timers_of(req.add_timers),
        .entries = entries_of(req.entries),
        .published = {},
        .restart = req.restart_params.has_value(),
        .params = req.restart_params ? req.restart_params->dump() : std::string()};
    for (auto& [name, value] : req.published) args.published.add(name, value.dump());
    for (auto id : req.consume) args.consume.add(decimal(id));
    for (auto seq : req.cancel_timers) args.cancel_timers.add(decimal(seq));
    auto r = co_await call(scripts_.commit, std::move(keys), std::move(args), replication::wait);
    if (r.is_array() && r.elements().size() == 2 && r.elements()[0].text() == "ok")
        co_return commit_result{r.elements()[1].integer().value_or(0) == 1};
    if (auto e = parse_store_error(text_of(r))) co_return unexpected(*e);
    throw store_unavailable("process store: unexpected commit reply " + r.to_debug_string());
}

// An answer is a key of its own beside the instance's (same hash tag), expiring by itself:
// it outlives the instance when the instance ends first.
asio::awaitable<void> redis_store::put_answer(std::string id, std::string request,
                                              nlohmann::json answer, duration retention) {
    auto ms = std::max<std::int64_t>(ms_ceil(retention), 1);
    auto r = co_await ready().exec("SET", key(id, "answer:" + request), answer.dump(), "PX", ms);
    if (!r) throw store_unavailable("process store: " + r.error().what());
}

// A limit's two keys share its hash tag, so one script serves it on a cluster too.
asio::awaitable<permit_answer> redis_store::acquire_permit(limit l, std::string holder,
                                                           time_point now) {
    auto base = options_.prefix + ":limit:{" + l.name + "}:";
    std::vector<std::string> keys{base + "grants", base + "holders"};
    auto at = decimal(ms_floor(now));
    scripts::permit_args args{.now = at,
                              .rate = decimal(l.rate),
                              .per = decimal(ms_ceil(l.per)),
                              .concurrency = decimal(l.concurrency),
                              .hold = decimal(ms_ceil(l.max_hold)),
                              .holder = holder,
                              .grant = holder + "@" + at + "/" + decimal(++permit_grants_)};
    auto r = co_await call(scripts_.permit, std::move(keys), std::move(args));
    auto e = r.elements();
    if (e.size() != 2) throw store_unavailable("process store: unexpected permit reply");
    co_return permit_answer{e[0].integer().value_or(0) == 1,
                            std::chrono::milliseconds(e[1].integer().value_or(1))};
}

asio::awaitable<void> redis_store::release_permit(std::string limit, std::string holder) {
    auto r =
        co_await ready().exec("ZREM", options_.prefix + ":limit:{" + limit + "}:holders", holder);
    if (!r) throw store_unavailable("process store: " + r.error().what());
}

// A queue's keys share its hash tag, so one script serves it on a cluster too. Each call
// declares every key it touches, partitions' lines included (queue.lua says why).
namespace {

struct queue_call {
    std::vector<std::string> keys;
    scripts::queue_args args;

    void with_line(std::string_view partition) {
        keys.push_back(args.base + "w:" + std::string(partition));
    }
    // The call is made by `worker` (enqueue, admit), whose admissions it counts.
    void by_worker(std::string worker) {
        keys[worker_set] += worker;
        args.worker = std::move(worker);
    }
    static constexpr std::size_t worker_set = 8;
};

// How many partitions, at most, an admission round of `max` entries is given the lines of:
// some may be passed over for their partition_concurrency.
std::size_t lines_for_round(std::size_t max) {
    return std::min<std::size_t>(2 * max + 16, 512);
}

// A call on queue `q`, with its limits (zero for the calls that need the name only).
queue_call queue_call_for(const std::string& prefix, const queue& q, std::string op) {
    queue_call c;
    c.args.base = prefix + ":queue:{" + q.name + "}:";
    for (const char* k : {"entries", "dedup", "ring", "admitted", "held", "window", "seq", "waits"})
        c.keys.push_back(c.args.base + k);
    c.args.op = std::move(op);
    c.args.priority = c.args.now = c.args.max = c.args.recheck = "0";
    c.args.concurrency = decimal(q.concurrency);
    c.args.partition_concurrency = decimal(q.partition_concurrency);
    c.args.rate = decimal(q.rate);
    c.args.per = decimal(std::chrono::ceil<std::chrono::milliseconds>(q.per).count());
    c.args.worker_concurrency = decimal(q.worker_concurrency);
    c.keys.push_back(c.args.base + "k:");  // the calling worker's admissions (by_worker)
    return c;
}

queue_call queue_call_for(const std::string& prefix, const std::string& name, std::string op) {
    return queue_call_for(prefix, queue{.name = name}, std::move(op));
}

// Instances one leave call takes out of a queue, at most: a bound on the script's time.
constexpr std::size_t max_leaving_per_call = 256;

std::string ms_text(duration d) {
    return decimal(
        std::max<std::int64_t>(std::chrono::ceil<std::chrono::milliseconds>(d).count(), 1));
}

}  // namespace

asio::awaitable<enqueued> redis_store::enqueue(queue q, queue_entry entry, duration recheck) {
    auto c = queue_call_for(options_.prefix, q, "enqueue");
    c.args.instance = entry.instance;
    c.args.partition = entry.options.partition;
    c.args.priority = decimal(entry.options.priority);
    c.args.dedup = entry.options.dedup;
    c.args.now = decimal(ms_floor(entry.at));
    c.args.recheck = ms_text(recheck);
    c.by_worker(std::move(entry.worker));
    c.with_line(entry.options.partition);
    auto r = co_await call(scripts_.queue, std::move(c.keys), std::move(c.args));
    auto e = r.elements();
    if (e.size() != 3) throw store_unavailable("process store: unexpected enqueue reply");
    co_return enqueued{text_of(e[0]), e[1].integer().value_or(0) == 1,
                       e[2].integer().value_or(0) == 1};
}

asio::awaitable<admission_round> redis_store::admit(queue q, time_point now, std::size_t max,
                                                    duration recheck, std::string worker) {
    auto c = queue_call_for(options_.prefix, q, "admit");
    c.by_worker(std::move(worker));
    c.args.now = decimal(ms_floor(now));
    c.args.max = decimal(max);
    c.args.recheck = ms_text(recheck);
    auto ring = c.keys[2];
    auto in_turn = co_await ready().exec("LRANGE", ring, "0", decimal(lines_for_round(max) - 1));
    if (!in_turn) throw store_unavailable("process store: " + in_turn.error().what());
    for (const auto& p : in_turn->elements()) c.with_line(text_of(p));
    auto r = co_await call(scripts_.queue, std::move(c.keys), std::move(c.args));
    auto e = r.elements();
    if (e.size() < 2) throw store_unavailable("process store: unexpected admit reply");
    admission_round out;
    if (auto next = e[0].integer().value_or(-1); next >= 0) out.next = from_ms(next);
    out.waiting = e[1].integer().value_or(0) == 1;
    for (std::size_t i = 2; i < e.size(); ++i) {
        auto f = e[i].elements();
        if (f.size() != 3) throw store_unavailable("process store: unexpected admit reply");
        out.admitted.push_back(admission{text_of(f[0]), from_ms(f[1].integer().value_or(0)),
                                         f[2].integer().value_or(0) == 1});
    }
    co_return out;
}

asio::awaitable<void> redis_store::leave_queue(std::string queue,
                                               std::vector<std::string> instances) {
    // Admitted entries leave in one call; waiting ones are named their lines by the first.
    for (std::size_t from = 0; from < instances.size(); from += max_leaving_per_call) {
        auto c = queue_call_for(options_.prefix, queue, "leave");
        auto to = std::min(instances.size(), from + max_leaving_per_call);
        for (std::size_t i = from; i < to; ++i) c.args.leaving.add(std::move(instances[i]));
        auto r = co_await call(scripts_.queue, std::move(c.keys), std::move(c.args));
        auto unnamed = r.elements();
        if (unnamed.empty()) continue;
        auto again = queue_call_for(options_.prefix, queue, "leave");
        std::set<std::string> lines;
        for (const auto& u : unnamed) {
            auto f = u.elements();
            if (f.size() != 2) throw store_unavailable("process store: unexpected leave reply");
            again.args.leaving.add(text_of(f[0]));
            if (lines.insert(text_of(f[1])).second) again.with_line(text_of(f[1]));
        }
        co_await call(scripts_.queue, std::move(again.keys), std::move(again.args));
    }
}

asio::awaitable<queue_state> redis_store::describe_queue(std::string queue, std::size_t top) {
    auto c = queue_call_for(options_.prefix, queue, "describe");
    c.args.max = decimal(top);
    auto r = co_await call(scripts_.queue, std::move(c.keys), std::move(c.args));
    auto e = r.elements();
    if (e.size() < 3) throw store_unavailable("process store: unexpected queue reply");
    queue_state out;
    out.waiting = static_cast<std::uint64_t>(e[0].integer().value_or(0));
    out.admitted = static_cast<std::uint64_t>(e[1].integer().value_or(0));
    out.more_partitions = e[2].integer().value_or(0) == 1;
    for (std::size_t i = 3; i < e.size(); ++i) {
        auto f = e[i].elements();
        if (f.size() != 3) throw store_unavailable("process store: unexpected queue reply");
        out.partitions.push_back({text_of(f[0]),
                                  static_cast<std::uint64_t>(f[1].integer().value_or(0)),
                                  static_cast<std::uint64_t>(f[2].integer().value_or(0))});
    }
    co_return out;
}

asio::awaitable<std::optional<nlohmann::json>> redis_store::answer(std::string id,
                                                                   std::string request) {
    auto r = co_await ready().exec("GET", key(id, "answer:" + request));
    if (!r) throw store_unavailable("process store: " + r.error().what());
    if (r->is_nil()) co_return std::nullopt;
    co_return nlohmann::json::parse(text_of(*r));
}

asio::awaitable<delivery> redis_store::deliver(std::string id, inbox_entry signal) {
    scripts::deliver_args args{.id = id,
                               .key = signal.key,
                               .path = signal.path,
                               .at = decimal(ms_floor(signal.at)),
                               .signal = detail::signal_text(signal)};
    auto r = co_await call(scripts_.deliver, instance_keys(*this, id), std::move(args),
                           replication::wait);
    auto e = r.elements();
    auto outcome = text_of(e[0]);
    delivery d;
    d.waiting = e[1].integer().value_or(0) == 1;
    d.id = static_cast<std::uint64_t>(e[2].integer().value_or(0));
    if (outcome == "stored")
        d.result = delivery::outcome::stored;
    else if (outcome == "duplicate")
        d.result = delivery::outcome::duplicate;
    else if (outcome == "finished")
        d.result = delivery::outcome::finished;
    else
        d.result = delivery::outcome::no_instance;
    co_return d;
}

asio::awaitable<bool> redis_store::has_subscribers(std::size_t shard,
                                                   const std::vector<std::string>& subscriptions) {
    if (subscriptions.empty()) co_return false;
    std::vector<std::string> args{"EXISTS"};
    for (const auto& sub : subscriptions) args.push_back(subscription_key(shard, sub));
    auto r = co_await ready().execute(redis::command::from_args(args));
    if (!r) throw store_unavailable("process store: " + r.error().what());
    co_return r->integer().value_or(1) > 0;
}

asio::awaitable<fan_out_result> redis_store::run_fan_out(std::vector<std::string> keys,
                                                         std::string memo_window,
                                                         const fan_out_request& req,
                                                         const std::string& signal_json) {
    scripts::fan_out_args args{.memo_ms = std::move(memo_window),
                               .key = req.signal.key,
                               .path = req.signal.path,
                               .at = decimal(ms_floor(req.signal.at)),
                               .signal = signal_json,
                               .documents = documents_of(keys, req.documents),
                               .subscriptions = {req.subscriptions}};
    if (req.take) {
        args.worker = req.take->worker;
        args.now = decimal(ms_floor(req.take->now));
        args.ttl = decimal(ms_ceil(req.take->ttl));
        args.refused = refusals_of(req.take->refused);
    }
    auto r = co_await call(scripts_.fan_out, std::move(keys), std::move(args), replication::wait);
    auto e = r.elements();
    fan_out_result out;
    out.reached = static_cast<std::size_t>(e[0].integer().value_or(0));
    auto flag = e.size() > 1 ? e[1].integer().value_or(0) : 0;
    out.duplicate = flag == 1;
    out.documents_changed = flag == 2;
    for (std::size_t i = 2; i + 3 < e.size(); i += 4) {
        delivery d;
        d.result = delivery::outcome::stored;
        d.id = static_cast<std::uint64_t>(e[i + 1].integer().value_or(0));
        d.waiting = e[i + 2].integer().value_or(0) == 1;
        auto id = text_of(e[i]);
        if (req.take && e[i + 3].is_array()) {
            auto got = parse_taken(e[i + 3].elements(), req.take->worker, std::nullopt,
                                   journal_sent::never);
            got.snapshot.id = id;  // id and lease are not in fan_out.lua's reply
            got.snapshot.lease = got.grant.lease;
            got.snapshot.lease_expires = got.grant.expires;
            out.taken.emplace_back(id, std::move(got));
        }
        out.delivered.emplace_back(std::move(id), d);
    }
    co_return out;
}

asio::awaitable<fan_out_result> redis_store::fan_out(fan_out_request req) {
    if (!req.documents.empty() && redis_.is_cluster())  // see writes_documents()
        throw std::logic_error(
            "process store: a fan-out on a cluster cannot write entity documents");
    const auto& key = req.signal.key;
    const auto count = shards();
    auto memo_key = fmt::format("{}:fan_out:{}", options_.prefix, key);
    auto window = std::to_string(std::max<std::int64_t>(1, ms_ceil(req.window)));
    auto signal = detail::signal_text(req.signal);
    // On one server, the memo, the documents and every shard in one script: one round trip.
    if (!redis_.is_cluster()) {
        std::vector<std::string> keys;
        keys.reserve(req.subscriptions.size() * count + 1);
        for (const auto& sub : req.subscriptions)
            for (std::size_t shard = 0; shard < count; ++shard)
                keys.push_back(subscription_key(shard, sub));
        std::string memo_window;  // named: g++ 12 mishandles temporaries beside a co_await
        if (!key.empty()) {
            keys.push_back(memo_key);
            memo_window = window;
        }
        co_return co_await run_fan_out(std::move(keys), std::move(memo_window), req, signal);
    }
    // On a cluster the shards live in different slots. First, at once: the memo of an earlier
    // fan-out with this key, and which shards hold subscribers (one EXISTS each, far cheaper
    // for Redis than a script that finds nobody).
    std::optional<std::string> memo;
    std::vector<char> subscribed(count, 0);
    auto look = [&](concurrency::nursery& n) -> asio::awaitable<void> {
        if (!key.empty())
            n.spawn([&]() -> asio::awaitable<void> {
                auto first = co_await ready().exec("GET", memo_key);
                if (!first) throw store_unavailable("process store: " + first.error().what());
                if (auto text = first->text()) memo = std::string(*text);
            });
        for (std::size_t shard = 0; shard < count; ++shard)
            n.spawn([&, shard]() -> asio::awaitable<void> {
                subscribed[shard] = co_await has_subscribers(shard, req.subscriptions) ? 1 : 0;
            });
        co_return;
    };
    concurrency::nursery_options limits;  // named: no braced default beside the co_await
    co_await concurrency::open_nursery(look, limits);
    if (memo) co_return fan_out_result{static_cast<std::size_t>(std::stoull(*memo)), true, {}};

    // The shards with subscribers, at once, gathered in shard order.
    std::vector<fan_out_result> parts(count);
    auto send = [&](concurrency::nursery& n) -> asio::awaitable<void> {
        for (std::size_t shard = 0; shard < count; ++shard)
            if (subscribed[shard])
                n.spawn([&, shard]() -> asio::awaitable<void> {
                    std::vector<std::string> keys;
                    for (const auto& sub : req.subscriptions)
                        keys.push_back(subscription_key(shard, sub));
                    std::string no_memo;
                    parts[shard] =
                        co_await run_fan_out(std::move(keys), std::move(no_memo), req, signal);
                });
        co_return;
    };
    co_await concurrency::open_nursery(send, limits);
    fan_out_result out;
    for (auto& part : parts) {
        out.reached += part.reached;
        for (auto& d : part.delivered) out.delivered.push_back(std::move(d));
        for (auto& t : part.taken) out.taken.push_back(std::move(t));
    }
    if (!key.empty()) {
        auto done =
            co_await ready().exec("SET", memo_key, std::to_string(out.reached), "PX", window, "NX");
        if (!done) throw store_unavailable("process store: " + done.error().what());
    }
    co_return out;
}

asio::awaitable<expected<redis::reply, store_error>> redis_store::run_acquire(
    std::string id, const std::string& worker, time_point now, duration ttl,
    const version_refusals& refused, std::string load) {
    scripts::acquire_args args{.id = id,
                               .worker = worker,
                               .now = decimal(ms_floor(now)),
                               .ttl = decimal(ms_ceil(ttl)),
                               .load = std::move(load),
                               .refused = refusals_of(refused)};
    auto r = co_await call(scripts_.acquire, instance_keys(*this, id), std::move(args),
                           replication::wait);
    auto code = text_of(r.elements()[0]);
    if (code != "ok")
        co_return unexpected(parse_store_error(code).value_or(store_error::not_found));
    co_return r;
}

asio::awaitable<expected<lease_grant, store_error>> redis_store::acquire(
    std::string id, std::string worker, time_point now, duration ttl, version_refusals refused) {
    std::string lease_only;  // named: g++ 12 mishandles temporaries beside a co_await
    auto r = co_await run_acquire(std::move(id), worker, now, ttl, refused, std::move(lease_only));
    if (!r) co_return unexpected(r.error());
    co_return parse_grant(r->elements(), std::move(worker));
}

asio::awaitable<expected<store::taken, store_error>> redis_store::take(
    std::string id, std::string worker, time_point now, duration ttl, version_refusals refused,
    std::optional<std::uint64_t> known_length) {
    std::string load = known_length ? std::to_string(*known_length) : "-";
    auto r = co_await run_acquire(std::move(id), worker, now, ttl, refused, std::move(load));
    if (!r) co_return unexpected(r.error());
    co_return parse_taken(r->elements(), std::move(worker), known_length);
}

asio::awaitable<bool> redis_store::renew(std::string id, lease_token lease, time_point now,
                                         duration ttl) {
    scripts::renew_args args{.id = id,
                             .worker = lease.worker,
                             .epoch = decimal(lease.epoch),
                             .now = decimal(ms_floor(now)),
                             .ttl = decimal(ms_ceil(ttl))};
    auto r = co_await call(scripts_.renew, instance_keys(*this, id), std::move(args));
    co_return r.integer().value_or(0) == 1;
}

asio::awaitable<bool> redis_store::note_attempt(std::string id, lease_token lease,
                                                step_attempt failed) {
    auto keys = instance_keys(*this, id);
    scripts::note_attempt_args args{.id = std::move(id),
                                    .worker = lease.worker,
                                    .epoch = decimal(lease.epoch),
                                    .seq = decimal(failed.seq),
                                    .attempt = attempt_json(failed),
                                    .now = decimal(ms_floor(failed.at))};
    auto r = co_await call(scripts_.note_attempt, std::move(keys), std::move(args));
    co_return r.integer().value_or(0) == 1;
}

asio::awaitable<void> redis_store::release(std::string id, lease_token lease) {
    scripts::release_args args{.id = id, .worker = lease.worker, .epoch = decimal(lease.epoch)};
    co_await call(scripts_.release, instance_keys(*this, id), std::move(args), replication::wait);
}

asio::awaitable<void> redis_store::leave(std::string id, lease_token lease, departure why) {
    scripts::release_args args{.id = id,
                               .worker = lease.worker,
                               .epoch = decimal(lease.epoch),
                               .departure = departure_json(why)};
    co_await call(scripts_.release, instance_keys(*this, id), std::move(args), replication::wait);
}

std::string redis_store::workers_key() const {
    return options_.prefix + ":workers";
}

namespace {
// 128 random bits as hex: a store's id.
std::string new_store_id() {
    std::random_device device;
    std::mt19937_64 bits((std::uint64_t(device()) << 32) ^ device());
    return fmt::format("{:016x}{:016x}", bits(), bits());
}
}  // namespace

asio::awaitable<std::optional<store_identity>> redis_store::identity(identity_action action,
                                                                     bool create) {
    scripts::identity_args args{.create = action != identity_action::read && create,
                                .confirm = action == identity_action::confirm,
                                .new_id = new_store_id(),
                                .now = decimal(ms_floor(std::chrono::system_clock::now()))};
    std::vector<std::string> keys{options_.prefix + ":identity"};
    auto writes = args.create || args.confirm;
    auto r = co_await call(scripts_.identity, std::move(keys), std::move(args),
                           writes ? replication::wait : replication::none);
    if (r.is_nil()) co_return std::nullopt;
    auto e = r.elements();
    co_return store_identity{text_of(e[0]), text_of(e[1])};
}

asio::awaitable<std::vector<worker_record>> redis_store::announce(worker_record self) {
    scripts::announce_args args{.worker = self.worker,
                                .expires = decimal(ms_ceil(self.expires)),
                                .announcement = worker_json(self),
                                .now = decimal(ms_floor(self.seen))};
    std::vector<std::string> keys{workers_key()};
    auto r = co_await call(scripts_.announce, std::move(keys), std::move(args));
    std::vector<worker_record> live;
    for (const auto& e : r.elements()) live.push_back(parse_worker(text_of(e)));
    std::ranges::sort(live, {}, &worker_record::worker);
    co_return live;
}

asio::awaitable<void> redis_store::withdraw(std::string worker) {
    auto r = co_await ready().exec("HDEL", workers_key(), worker);
    if (!r) throw store_unavailable("process store: " + r.error().what());
}

asio::awaitable<std::vector<worker_record>> redis_store::workers(time_point now) {
    auto r = co_await ready().exec("HVALS", workers_key());
    if (!r) throw store_unavailable("process store: " + r.error().what());
    std::vector<worker_record> live;
    for (const auto& e : r->elements()) {
        auto value = text_of(e);
        auto space = value.find(' ');
        if (space == std::string::npos) continue;
        auto w = parse_worker(value.substr(space + 1));
        if (w.expires >= now) live.push_back(std::move(w));
    }
    std::ranges::sort(live, {}, &worker_record::worker);
    co_return live;
}

asio::awaitable<std::vector<std::string>> redis_store::due(time_point now, std::size_t limit,
                                                           version_refusals refused) {
    std::vector<std::string> ids;
    auto now_ms = ms_floor(now);
    auto until = std::to_string(now_ms + ms_ceil(options_.claim_ttl));
    // Start at a different shard each call so no shard is always served first.
    const auto count = shards();
    auto first = static_cast<std::size_t>(now_ms) % count;
    for (std::size_t i = 0; i < count && ids.size() < limit; ++i) {
        auto shard = (first + i) % count;
        scripts::claim_args args{.now = decimal(now_ms),
                                 .limit = decimal(limit - ids.size()),
                                 .until = until,
                                 .instance_prefix = instance_prefix(shard),
                                 .refused = refusals_of(refused)};
        std::vector<std::string> keys{wake_key(shard)};
        auto r = co_await call(scripts_.claim, std::move(keys), std::move(args));
        for (const auto& e : r.elements()) ids.push_back(text_of(e));
    }
    co_return ids;
}

asio::awaitable<std::optional<time_point>> redis_store::next_due() {
    std::optional<time_point> earliest;
    const auto count = shards();
    for (std::size_t shard = 0; shard < count; ++shard) {
        auto r = co_await ready().exec("ZRANGE", wake_key(shard), 0, 0, "WITHSCORES");
        if (!r) throw store_unavailable("process store: " + r.error().what());
        auto e = r->elements();
        if (e.size() < 2) continue;
        auto t = from_ms(static_cast<std::int64_t>(std::stod(text_of(e[1]))));
        if (!earliest || t < *earliest) earliest = t;
    }
    co_return earliest;
}

asio::awaitable<std::vector<std::string>> redis_store::commit_log(std::string id) {
    auto r = co_await ready().exec("LRANGE", key(id, "commits"), 0, -1);
    if (!r) throw store_unavailable("process store: " + r.error().what());
    std::vector<std::string> out;
    for (const auto& e : r->elements()) out.push_back(text_of(e));
    co_return out;
}

asio::awaitable<expected<void, store_error>> redis_store::rewind(rewind_request req) {
    scripts::rewind_args args{.id = req.instance,
                              .expected_length = decimal(req.expected_length),
                              .keep = decimal(req.keep),
                              .now = decimal(ms_floor(req.now)),
                              .left_out = id_list(req.left_out),
                              .restore = {}};
    for (const auto& e : req.restore)
        args.restore.add(decimal(e.id), decimal(ms_floor(e.at)) + " " + e.path,
                         detail::signal_text(e));
    auto r = co_await call(scripts_.rewind, instance_keys(*this, req.instance), std::move(args),
                           replication::wait);
    auto code = text_of(r);
    if (code == "ok") co_return expected<void, store_error>();
    if (auto e = parse_store_error(code)) co_return unexpected(*e);
    throw store_unavailable("process store: unexpected rewind reply " + r.to_debug_string());
}

asio::awaitable<expected<inbox_entry, store_error>> redis_store::remove_signal(
    remove_signal_request req) {
    scripts::remove_signal_args args{
        .id = req.instance, .inbox_id = decimal(req.inbox_id), .now = decimal(ms_floor(req.now))};
    auto r = co_await call(scripts_.remove_signal, instance_keys(*this, req.instance),
                           std::move(args), replication::wait);
    auto e = r.elements();
    auto code = e.empty() ? std::string_view() : view_of(e[0]);
    if (code == "ok" && e.size() == 2)
        co_return detail::parse_signal_text(req.inbox_id, view_of(e[1]));
    if (auto error = parse_store_error(code)) co_return unexpected(*error);
    throw store_unavailable("process store: unexpected remove_signal reply " + r.to_debug_string());
}

asio::awaitable<void> redis_store::list_shard(std::size_t shard, const list_query& query,
                                              const std::vector<std::string>& bounds,
                                              redis::reply& out) {
    scripts::list_args args{
        .definition = query.definition.value_or(""),
        .status = query.status ? std::string(to_string(*query.status)) : std::string(),
        .prefix = query.prefix,
        .top = bounds[0],  // as list() builds them
        .cursor = bounds[1],
        .bottom = bounds[2],
        .limit = decimal(query.limit),
        .budget = decimal(options_.list_budget)};
    std::vector<std::string> keys{wake_key(shard)};
    out = co_await call(scripts_.list, std::move(keys), std::move(args));
}

asio::awaitable<void> redis_store::changed_times(std::span<instance_summary* const> of) {
    std::vector<std::string> keys;
    for (const auto* s : of) {
        keys.push_back(key(s->id, "meta"));
        keys.push_back(key(s->id, "journal"));
    }
    scripts::changed_args no_args;
    auto r = co_await call(scripts_.changed, std::move(keys), no_args);
    auto e = r.elements();
    for (std::size_t i = 0; i < of.size() && i < e.size(); ++i)
        of[i]->changed = from_ms(to_int(text_of(e[i])));
}

asio::awaitable<list_page> redis_store::list(list_query query) {
    using detail::lists_before;
    query.limit = std::clamp<std::size_t>(query.limit, 1, 1000);
    // The score window: [since, min(until - 1, cursor)], entries at the cursor's score only
    // below its id.
    std::string top = "+inf", cursor_id;
    std::optional<std::int64_t> top_score;
    if (query.until) top_score = ms_ceil(*query.until) - 1;
    if (!query.cursor.empty()) {
        auto c = detail::parse_cursor(query.cursor);
        if (!c) throw std::invalid_argument("not a listing cursor: " + query.cursor);
        if (!top_score || c->created_ms <= *top_score) {
            top_score = c->created_ms;
            cursor_id = c->id;
        }
    }
    if (top_score) top = std::to_string(*top_score);
    std::string bottom = query.since ? std::to_string(ms_ceil(*query.since)) : "-inf";
    std::vector<std::string> bounds{top, cursor_id, bottom};

    const auto count = shards();
    std::vector<redis::reply> parts(count);
    auto send_all = [&](concurrency::nursery& n) -> asio::awaitable<void> {
        for (std::size_t shard = 0; shard < count; ++shard)
            n.spawn(list_shard(shard, query, bounds, parts[shard]));
        co_return;
    };
    concurrency::nursery_options limits;  // named: no braced default beside the co_await
    co_await concurrency::open_nursery(send_all, limits);

    // Everything above the highest boundary was examined on every shard.
    std::optional<detail::list_position> boundary;
    std::vector<std::pair<std::int64_t, instance_summary>> found;
    for (const auto& part : parts) {
        auto e = part.elements();
        if (e.size() < 2) continue;
        if (auto b = text_of(e[0]); !b.empty()) {
            detail::list_position c{to_int(b), text_of(e[1])};
            if (!boundary || lists_before(c.created_ms, c.id, boundary->created_ms, boundary->id))
                boundary = c;
        }
        for (std::size_t i = 2; i + 3 < e.size(); i += 4) {
            auto score = to_int(text_of(e[i + 1]));
            instance_summary s{
                text_of(e[i]),
                text_of(e[i + 3]),
                parse_index_status(text_of(e[i + 2])).value_or(index_status::running),
                from_ms(score),
                {}};
            found.emplace_back(score, std::move(s));
        }
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
        return lists_before(a.first, a.second.id, b.first, b.second.id);
    });
    list_page page;
    for (auto& [score, summary] : found) {
        if (page.instances.size() == query.limit) break;
        if (boundary && lists_before(boundary->created_ms, boundary->id, score, summary.id)) break;
        page.instances.push_back(std::move(summary));
    }
    if (page.instances.size() == query.limit) {
        const auto& last = page.instances.back();
        page.next = detail::format_cursor(ms_floor(last.created), last.id);
    } else if (boundary) {
        page.next = detail::format_cursor(boundary->created_ms, boundary->id);
    }
    co_await fill_changed(page.instances);
    co_return page;
}

asio::awaitable<void> redis_store::fill_changed(std::vector<instance_summary>& page) {
    std::vector<std::vector<instance_summary*>> by_shard(shards());
    for (auto& s : page) by_shard[shard_of(s.id)].push_back(&s);
    auto send_all = [&](concurrency::nursery& n) -> asio::awaitable<void> {
        for (const auto& group : by_shard)
            if (!group.empty()) n.spawn(changed_times(group));
        co_return;
    };
    concurrency::nursery_options limits;
    co_await concurrency::open_nursery(send_all, limits);
}

asio::awaitable<instance_counts> redis_store::counts() {
    instance_counts out;
    const auto count = shards();
    for (std::size_t shard = 0; shard < count; ++shard) {
        std::vector<std::string> keys{wake_key(shard)};
        scripts::counts_args no_args;
        auto r = co_await call(scripts_.counts, std::move(keys), no_args);
        auto e = r.elements();
        for (std::size_t i = 0; i + 2 < e.size(); i += 3) {
            auto status = parse_index_status(text_of(e[i]));
            if (!status) continue;
            out[text_of(e[i + 1])][static_cast<std::size_t>(*status)] += static_cast<std::uint64_t>(
                std::max<std::int64_t>(0, e[i + 2].integer().value_or(0)));
        }
    }
    co_return out;
}

asio::awaitable<std::optional<journal_page>> redis_store::read_journal(std::string id,
                                                                       std::size_t retry,
                                                                       std::uint64_t offset,
                                                                       std::size_t limit) {
    auto list = key(id, "journal");
    if (retry > 0) list += ":" + std::to_string(retry);
    // Whether the instance, and the retry, exist: from the meta hash (its `retries`, the retry
    // count rewind.lua keeps), never from the list, which Redis does not keep while empty
    // (rewind.lua copies no list for an empty journal): an empty journal is an empty page.
    if (retry == 0) {
        auto exists = co_await ready().exec("EXISTS", key(id, "meta"));
        if (!exists) throw store_unavailable("process store: " + exists.error().what());
        if (exists->integer().value_or(0) == 0) co_return std::nullopt;
    } else {
        auto retries = co_await ready().exec("HGET", key(id, "meta"), "retries");
        if (!retries) throw store_unavailable("process store: " + retries.error().what());
        if (retries->is_nil() || to_int(view_of(*retries)) < static_cast<std::int64_t>(retry))
            co_return std::nullopt;  // no such instance, or not retried that often
    }
    auto total = co_await ready().exec("LLEN", list);
    if (!total) throw store_unavailable("process store: " + total.error().what());
    journal_page page;
    page.total = static_cast<std::uint64_t>(total->integer().value_or(0));
    if (limit > 0 && offset < page.total) {
        auto last = static_cast<std::int64_t>(offset + limit) - 1;
        auto r = co_await ready().exec("LRANGE", list, static_cast<std::int64_t>(offset), last);
        if (!r) throw store_unavailable("process store: " + r.error().what());
        for (const auto& entry : r->elements())
            page.entries.push_back(nlohmann::json::parse(text_of(entry)).get<journal_entry>());
    }
    co_return page;
}

}  // namespace keel::process

namespace keel::process::detail {

std::string_view lua(std::string_view name) {
    for (const lua_file& f : lua_files())
        if (f.name == name) return f.body;
    throw std::logic_error("no embedded Lua script " + std::string(name));
}

}  // namespace keel::process::detail
