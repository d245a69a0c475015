#pragma once

// What each of the Redis store's scripts takes in ARGV, declared once. A script's arguments
// are a struct whose `fields()` names its members in ARGV's order; that list is the only
// place positions exist:
//
//   - the store fills the struct and `argv()` lays it out;
//   - the script reads locals `arg_<name>` that `lua_arguments()` writes from the same list
//     and the store puts between the script's helpers and its body (redis_store.cpp).
//
// A script that names an argument its declaration lacks fails its first call (Redis refuses
// a script's undeclared globals); tests/process/script_calls_test.cpp checks that each script
// names every declared argument and no ARGV slot of its own. Internal to keel_process.
//
// A `list` argument's count takes its place among the fixed arguments; its items follow all
// the fixed ones, lists in the order declared. The script sees `arg_<name>_n` (the number of
// items, a Lua number) and `arg_<name>_at` (the ARGV index of the first item's first slot).
// Every other argument is a string in Lua, as Redis hands it over.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace keel::process::detail::scripts {

// A list argument whose items are `Stride` slots each.
template <std::size_t Stride = 1>
struct list {
    static constexpr std::size_t stride = Stride;

    template <class... Slot>
    requires(sizeof...(Slot) == Stride) void add(Slot&&... slot) {
        (slots.emplace_back(std::forward<Slot>(slot)), ...);
    }
    std::size_t size() const { return slots.size() / Stride; }

    std::vector<std::string> slots;
};

template <class Args, class T>
struct field {
    std::string_view name;
    T Args::*member;
};

// One entry of a `fields()` list.
template <class Args, class T>
constexpr field<Args, T> arg(std::string_view name, T Args::*member) {
    return {name, member};
}

namespace detail {

template <class T>
struct is_list : std::false_type {};
template <std::size_t S>
struct is_list<list<S>> : std::true_type {};

// The slot of a fixed argument; a string is moved out of an argument struct given as an
// rvalue (the call's own), copied otherwise.
template <class T>
std::string fixed_slot(T&& value) {
    using V = std::remove_cvref_t<T>;
    if constexpr (is_list<V>::value)
        return std::to_string(value.size());
    else if constexpr (std::is_same_v<V, bool>)
        return value ? "1" : "0";
    else if constexpr (std::is_integral_v<V>)
        return std::to_string(value);
    else if constexpr (std::is_same_v<V, std::string> && !std::is_lvalue_reference_v<T>)
        return std::move(value);
    else
        return std::string(value);
}

}  // namespace detail

// ARGV for a call: the fixed arguments, then the lists' items.
template <class Args>
std::vector<std::string> argv(Args&& args) {
    std::vector<std::string> out;
    auto fixed = [&](const auto&... f) {
        std::size_t items = 0;
        auto count = [&](const auto& g) {
            using T = std::remove_cvref_t<decltype(args.*(g.member))>;
            if constexpr (detail::is_list<T>::value) items += (args.*(g.member)).slots.size();
        };
        (count(f), ...);
        out.reserve(sizeof...(f) + items);  // one allocation: the lists' items follow
        (out.push_back(detail::fixed_slot(std::forward<Args>(args).*(f.member))), ...);
    };
    std::apply(fixed, std::remove_cvref_t<Args>::fields());
    auto items = [&](const auto& f) {
        using T = std::remove_cvref_t<decltype(args.*(f.member))>;
        if constexpr (detail::is_list<T>::value) {
            auto& slots = (args.*(f.member)).slots;
            if constexpr (std::is_rvalue_reference_v<Args&&>)
                out.insert(out.end(), std::make_move_iterator(slots.begin()),
                           std::make_move_iterator(slots.end()));
            else
                out.insert(out.end(), slots.begin(), slots.end());
        }
    };
    std::apply([&](const auto&... f) { (items(f), ...); }, std::remove_cvref_t<Args>::fields());
    return out;
}

// The Lua that gives a script its arguments by name (see the top of this file).
template <class Args>
std::string lua_arguments() {
    std::string out;
    std::size_t position = 0;
    std::vector<std::pair<std::string_view, std::size_t>> lists;  // name, stride
    auto declare = [&](const auto& f) {
        using T = std::remove_cvref_t<decltype(std::declval<Args&>().*(f.member))>;
        ++position;
        auto slot = "ARGV[" + std::to_string(position) + "]";
        if constexpr (detail::is_list<T>::value) {
            out += "local arg_" + std::string(f.name) + "_n = tonumber(" + slot + ")\n";
            lists.emplace_back(f.name, T::stride);
        } else {
            out += "local arg_" + std::string(f.name) + " = " + slot + "\n";
        }
    };
    std::apply([&](const auto&... f) { (declare(f), ...); }, Args::fields());
    std::string next = std::to_string(position + 1);
    for (auto [name, stride] : lists) {
        auto at = "arg_" + std::string(name) + "_at";
        out += "local " + at + " = " + next + "\n";
        next = at + " + " + std::to_string(stride) + " * arg_" + std::string(name) + "_n";
    }
    return out;
}

// The names a script's body may use: arg_<name>, or arg_<name>_n and arg_<name>_at of a list.
template <class Args>
std::vector<std::string> lua_names() {
    std::vector<std::string> out;
    auto name = [&](const auto& f) {
        using T = std::remove_cvref_t<decltype(std::declval<Args&>().*(f.member))>;
        if constexpr (detail::is_list<T>::value) {
            out.push_back("arg_" + std::string(f.name) + "_n");
            out.push_back("arg_" + std::string(f.name) + "_at");
        } else {
            out.push_back("arg_" + std::string(f.name));
        }
    };
    std::apply([&](const auto&... f) { (name(f), ...); }, Args::fields());
    return out;
}

// --- the scripts' arguments -------------------------------------------------------------
// Each names its script file; times are ms since the epoch, as decimal text.

// A document write (prelude.lua, documents_as_expected): expected (1/0), expected text, new
// text. The documents' keys follow the other keys the script is given.
using documents = list<3>;
// A timer: seq, due, name.
using timers = list<3>;
// A refused "<definition>\n<version>".
using refusals = list<1>;

struct start_args {
    static constexpr std::string_view file = "start.lua";
    std::string id, definition, params, worker, now, lease_expires, version;
    std::string parent;  // '' for none
    std::string trace;   // the start's traceparent; '' for none
    list<1> subscriptions;
    bool compact_subscriptions = true;  // new subscription keys as hashes (store level 4)
    scripts::documents documents;
    // An instance whose handler waits before any step starts suspended, without a lease:
    bool suspended = false;
    bool queued = false;  // suspended, waiting for its queue: listed as queued
    std::string waits;    // its wait set (JSON)
    scripts::timers timers;
    list<1> entries;  // the journal entries it recorded before the wait, or its first step

    static constexpr auto fields() {
        using a = start_args;
        return std::tuple{arg("id", &a::id),
                          arg("definition", &a::definition),
                          arg("params", &a::params),
                          arg("worker", &a::worker),
                          arg("now", &a::now),
                          arg("lease_expires", &a::lease_expires),
                          arg("version", &a::version),
                          arg("parent", &a::parent),
                          arg("trace", &a::trace),
                          arg("subscriptions", &a::subscriptions),
                          arg("compact_subscriptions", &a::compact_subscriptions),
                          arg("documents", &a::documents),
                          arg("suspended", &a::suspended),
                          arg("queued", &a::queued),
                          arg("waits", &a::waits),
                          arg("timers", &a::timers),
                          arg("entries", &a::entries)};
    }
};

struct load_args {
    static constexpr std::string_view file = "load.lua";
    bool journal = false;

    static constexpr auto fields() { return std::tuple{arg("journal", &load_args::journal)}; }
};

struct commit_args {
    static constexpr std::string_view file = "commit.lua";
    std::string id, worker, epoch, expected_length;
    std::string status;  // '' to keep it
    bool parked = false;
    bool has_error = false;
    std::string error;
    bool has_result = false;
    std::string result;
    bool release = false;
    bool audit = false;
    std::string retention;  // ms
    bool has_waits = false;
    std::string waits;  // JSON
    std::string now;
    scripts::documents documents;
    list<1> consume;         // inbox ids
    list<1> cancel_timers;   // seqs
    scripts::timers timers;  // added
    list<1> entries;
    list<2> published;  // name, JSON: meta fields published:<name> (context::publish)
    bool restart = false;  // continue as new with `params` (commit_request::restart_params)
    std::string params;    // JSON

    static constexpr auto fields() {
        using a = commit_args;
        return std::tuple{arg("id", &a::id),
                          arg("worker", &a::worker),
                          arg("epoch", &a::epoch),
                          arg("expected_length", &a::expected_length),
                          arg("status", &a::status),
                          arg("parked", &a::parked),
                          arg("has_error", &a::has_error),
                          arg("error", &a::error),
                          arg("has_result", &a::has_result),
                          arg("result", &a::result),
                          arg("release", &a::release),
                          arg("audit", &a::audit),
                          arg("retention", &a::retention),
                          arg("has_waits", &a::has_waits),
                          arg("waits", &a::waits),
                          arg("now", &a::now),
                          arg("documents", &a::documents),
                          arg("consume", &a::consume),
                          arg("cancel_timers", &a::cancel_timers),
                          arg("timers", &a::timers),
                          arg("entries", &a::entries),
                          arg("published", &a::published),
                          arg("restart", &a::restart),
                          arg("params", &a::params)};
    }
};

struct append_args {
    static constexpr std::string_view file = "append.lua";
    std::string worker, epoch, expected_length;
    bool audit = false;
    scripts::documents documents;
    list<1> entries;

    static constexpr auto fields() {
        using a = append_args;
        return std::tuple{arg("worker", &a::worker),
                          arg("epoch", &a::epoch),
                          arg("expected_length", &a::expected_length),
                          arg("audit", &a::audit),
                          arg("documents", &a::documents),
                          arg("entries", &a::entries)};
    }
};

struct deliver_args {
    static constexpr std::string_view file = "deliver.lua";
    std::string id, key, path, at, signal;  // key: the idempotency key; signal: JSON

    static constexpr auto fields() {
        using a = deliver_args;
        return std::tuple{arg("id", &a::id), arg("key", &a::key), arg("path", &a::path),
                          arg("at", &a::at), arg("signal", &a::signal)};
    }
};

struct fan_out_args {
    static constexpr std::string_view file = "fan_out.lua";
    std::string memo_ms;  // the memo's lifetime; '': no memo in this call
    std::string key, path, at, signal;
    std::string worker;  // the taking worker; '': none
    std::string now = "0", ttl = "0";
    scripts::documents documents;
    refusals refused;
    list<1> subscriptions;

    static constexpr auto fields() {
        using a = fan_out_args;
        return std::tuple{arg("memo_ms", &a::memo_ms),
                          arg("key", &a::key),
                          arg("path", &a::path),
                          arg("at", &a::at),
                          arg("signal", &a::signal),
                          arg("worker", &a::worker),
                          arg("now", &a::now),
                          arg("ttl", &a::ttl),
                          arg("documents", &a::documents),
                          arg("refused", &a::refused),
                          arg("subscriptions", &a::subscriptions)};
    }
};

struct acquire_args {
    static constexpr std::string_view file = "acquire.lua";
    std::string id, worker, now, ttl;
    // '' for the lease alone; to take the instance, the journal length the caller holds, or
    // '-' for none.
    std::string load;
    refusals refused;

    static constexpr auto fields() {
        using a = acquire_args;
        return std::tuple{arg("id", &a::id),     arg("worker", &a::worker),
                          arg("now", &a::now),   arg("ttl", &a::ttl),
                          arg("load", &a::load), arg("refused", &a::refused)};
    }
};

struct renew_args {
    static constexpr std::string_view file = "renew.lua";
    std::string id, worker, epoch, now, ttl;

    static constexpr auto fields() {
        using a = renew_args;
        return std::tuple{arg("id", &a::id), arg("worker", &a::worker), arg("epoch", &a::epoch),
                          arg("now", &a::now), arg("ttl", &a::ttl)};
    }
};

struct release_args {
    static constexpr std::string_view file = "release.lua";
    std::string id, worker, epoch;
    std::string departure;  // why the worker left (JSON); '': a plain release

    static constexpr auto fields() {
        using a = release_args;
        return std::tuple{arg("id", &a::id), arg("worker", &a::worker), arg("epoch", &a::epoch),
                          arg("departure", &a::departure)};
    }
};

struct claim_args {
    static constexpr std::string_view file = "claim.lua";
    std::string now, limit, until;
    std::string instance_prefix;  // the key prefix of the shard's instances
    refusals refused;

    static constexpr auto fields() {
        using a = claim_args;
        return std::tuple{arg("now", &a::now), arg("limit", &a::limit), arg("until", &a::until),
                          arg("instance_prefix", &a::instance_prefix), arg("refused", &a::refused)};
    }
};

struct rewind_args {
    static constexpr std::string_view file = "rewind.lua";
    std::string id, expected_length, keep, now;
    std::string left_out;  // the consumed signals not restored: inbox ids, comma-separated
    list<3> restore;       // inbox entries: inbox id, "<at ms> <path>", signal (JSON)

    static constexpr auto fields() {
        using a = rewind_args;
        return std::tuple{arg("id", &a::id),
                          arg("expected_length", &a::expected_length),
                          arg("keep", &a::keep),
                          arg("now", &a::now),
                          arg("left_out", &a::left_out),
                          arg("restore", &a::restore)};
    }
};

struct remove_signal_args {
    static constexpr std::string_view file = "remove_signal.lua";
    std::string id, inbox_id, now;

    static constexpr auto fields() {
        using a = remove_signal_args;
        return std::tuple{arg("id", &a::id), arg("inbox_id", &a::inbox_id), arg("now", &a::now)};
    }
};

struct list_args {
    static constexpr std::string_view file = "list.lua";
    std::string definition, status, prefix;  // '' for any
    std::string top;                         // highest score, or '+inf'
    std::string cursor;                      // entries scored exactly `top` only below it
    std::string bottom;                      // lowest score, or '-inf'
    std::string limit, budget;

    static constexpr auto fields() {
        using a = list_args;
        return std::tuple{arg("definition", &a::definition), arg("status", &a::status),
                          arg("prefix", &a::prefix),         arg("top", &a::top),
                          arg("cursor", &a::cursor),         arg("bottom", &a::bottom),
                          arg("limit", &a::limit),           arg("budget", &a::budget)};
    }
};

struct note_attempt_args {
    static constexpr std::string_view file = "note_attempt.lua";
    std::string id, worker, epoch, seq, attempt, now;  // attempt: JSON

    static constexpr auto fields() {
        using a = note_attempt_args;
        return std::tuple{arg("id", &a::id),   arg("worker", &a::worker),   arg("epoch", &a::epoch),
                          arg("seq", &a::seq), arg("attempt", &a::attempt), arg("now", &a::now)};
    }
};

struct announce_args {
    static constexpr std::string_view file = "announce.lua";
    std::string worker, expires, announcement, now;  // announcement: JSON

    static constexpr auto fields() {
        using a = announce_args;
        return std::tuple{arg("worker", &a::worker), arg("expires", &a::expires),
                          arg("announcement", &a::announcement), arg("now", &a::now)};
    }
};

struct permit_args {
    static constexpr std::string_view file = "permit.lua";
    std::string now, rate, per, concurrency, hold;  // ms for times
    std::string holder;                             // the attempt's step: "<instance>#<seq>"
    std::string grant;  // unique per request: the member of the window's set

    static constexpr auto fields() {
        using a = permit_args;
        return std::tuple{arg("now", &a::now),    arg("rate", &a::rate),
                          arg("per", &a::per),    arg("concurrency", &a::concurrency),
                          arg("hold", &a::hold),  arg("holder", &a::holder),
                          arg("grant", &a::grant)};
    }
};

struct queue_args {
    static constexpr std::string_view file = "queue.lua";
    std::string op;  // enqueue, admit, leave, describe
    std::string base;
    std::string instance, partition, priority, dedup;  // enqueue, leave
    std::string now, max, recheck;                     // ms; max is also describe's top
    std::string concurrency, partition_concurrency, rate, per;
    std::string worker, worker_concurrency;  // enqueue, admit: the calling worker ('': none)
    list<> leaving;                          // leave: the instances

    static constexpr auto fields() {
        using a = queue_args;
        return std::tuple{arg("op", &a::op),
                          arg("base", &a::base),
                          arg("instance", &a::instance),
                          arg("partition", &a::partition),
                          arg("priority", &a::priority),
                          arg("dedup", &a::dedup),
                          arg("now", &a::now),
                          arg("max", &a::max),
                          arg("recheck", &a::recheck),
                          arg("concurrency", &a::concurrency),
                          arg("partition_concurrency", &a::partition_concurrency),
                          arg("rate", &a::rate),
                          arg("per", &a::per),
                          arg("worker", &a::worker),
                          arg("worker_concurrency", &a::worker_concurrency),
                          arg("leaving", &a::leaving)};
    }
};

struct shards_args {
    static constexpr std::string_view file = "shards.lua";
    std::string configured;  // '': none
    std::string new_store, before_record;

    static constexpr auto fields() {
        using a = shards_args;
        return std::tuple{arg("configured", &a::configured), arg("new_store", &a::new_store),
                          arg("before_record", &a::before_record)};
    }
};

struct identity_args {
    static constexpr std::string_view file = "identity.lua";
    bool create = false;   // make the record when there is none
    bool confirm = false;  // an operator accepts the store as it is
    std::string new_id;    // the id of a record made now
    std::string now;

    static constexpr auto fields() {
        using a = identity_args;
        return std::tuple{arg("create", &a::create), arg("confirm", &a::confirm),
                          arg("new_id", &a::new_id), arg("now", &a::now)};
    }
};

struct no_args {
    static constexpr auto fields() { return std::tuple{}; }
};
struct changed_args : no_args {
    static constexpr std::string_view file = "changed.lua";
};
struct counts_args : no_args {
    static constexpr std::string_view file = "counts.lua";
};

}  // namespace keel::process::detail::scripts
