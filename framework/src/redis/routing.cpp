#include "routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <keel/framework/redis/slot.hpp>
#include <optional>
#include <unordered_map>

namespace keel::redis::detail {
namespace {

// Where a command's keys are. `keys`: args[first..last] every `step` (last < 0 counts from
// the end: -1 is the last argument; `first` past the end means no keys). `numkeys`:
// args[first] is the number of keys that follow it; `dest_numkeys` also has a key at 1.
// `streams`: the first half of the arguments after STREAMS (XREAD, XREADGROUP).
enum class rule : std::uint8_t { keys, numkeys, dest_numkeys, streams, any, all, unsupported };

struct key_rule {
    rule what = rule::keys;
    int first = 1;
    int last = 1;
    int step = 1;
};

using rule_table = std::unordered_map<std::string_view, key_rule>;

// Splits the space-separated command names and gives each the rule.
void add(rule_table& table, key_rule r, std::string_view names) {
    while (!names.empty()) {
        auto space = names.find(' ');
        table.emplace(names.substr(0, space), r);
        names.remove_prefix(space == std::string_view::npos ? names.size() : space + 1);
    }
}

const rule_table& rules() {
    static const rule_table table = [] {
        rule_table t;
        add(t, {rule::keys, 1, 1, 1},
            "GET SET SETNX SETEX PSETEX GETSET GETDEL GETEX APPEND STRLEN SUBSTR INCR DECR "
            "INCRBY DECRBY INCRBYFLOAT GETRANGE SETRANGE GETBIT SETBIT BITCOUNT BITPOS "
            "BITFIELD BITFIELD_RO EXPIRE PEXPIRE EXPIREAT PEXPIREAT PERSIST TTL PTTL "
            "EXPIRETIME PEXPIRETIME TYPE DUMP RESTORE HSET HSETNX HGET HMSET HMGET HDEL "
            "HLEN HEXISTS HKEYS HVALS HGETALL HINCRBY HINCRBYFLOAT HSTRLEN HSCAN HRANDFIELD "
            "LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX LSET LREM LTRIM LINSERT "
            "LPOS SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SSCAN ZADD "
            "ZREM ZSCORE ZMSCORE ZINCRBY ZCARD ZCOUNT ZRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE "
            "ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE ZRANK ZREVRANK ZREMRANGEBYSCORE "
            "ZREMRANGEBYRANK ZREMRANGEBYLEX ZLEXCOUNT ZPOPMIN ZPOPMAX ZSCAN ZRANDMEMBER "
            "XADD XLEN XRANGE XREVRANGE XDEL XTRIM XACK XCLAIM XAUTOCLAIM XPENDING XSETID "
            "PFADD GEOADD GEODIST GEOHASH GEOPOS GEOSEARCH SORT SORT_RO SPUBLISH");
        add(t, {rule::keys, 2, 2, 1}, "OBJECT XINFO XGROUP MEMORY");
        add(t, {rule::keys, 1, -1, 1},
            "DEL UNLINK EXISTS TOUCH MGET SUNION SINTER SDIFF SUNIONSTORE SINTERSTORE "
            "SDIFFSTORE PFCOUNT PFMERGE");
        add(t, {rule::keys, 1, -1, 2}, "MSET MSETNX");
        add(t, {rule::keys, 1, 2, 1},
            "RENAME RENAMENX SMOVE RPOPLPUSH LMOVE COPY BLMOVE BRPOPLPUSH ZRANGESTORE "
            "GEOSEARCHSTORE LCS");
        add(t, {rule::keys, 1, -2, 1}, "BLPOP BRPOP BZPOPMIN BZPOPMAX");
        add(t, {rule::numkeys, 2}, "EVAL EVALSHA EVAL_RO EVALSHA_RO FCALL FCALL_RO BLMPOP BZMPOP");
        add(t, {rule::numkeys, 1}, "SINTERCARD ZINTERCARD LMPOP ZMPOP ZDIFF ZINTER ZUNION");
        add(t, {rule::dest_numkeys, 2}, "ZUNIONSTORE ZINTERSTORE ZDIFFSTORE");
        add(t, {rule::streams}, "XREAD XREADGROUP");
        add(t, {rule::any},
            "PING ECHO INFO TIME DBSIZE RANDOMKEY SCAN KEYS LASTSAVE ROLE CLUSTER COMMAND "
            "CONFIG CLIENT DEBUG LATENCY SLOWLOG LOLWUT WAIT WAITAOF ACL MODULE SAVE BGSAVE "
            "BGREWRITEAOF PUBLISH PUBSUB");
        add(t, {rule::all}, "SCRIPT FUNCTION FLUSHALL FLUSHDB");
        add(t, {rule::unsupported},
            "MULTI EXEC DISCARD WATCH UNWATCH SELECT SWAPDB SUBSCRIBE PSUBSCRIBE SSUBSCRIBE "
            "UNSUBSCRIBE PUNSUBSCRIBE SUNSUBSCRIBE MONITOR QUIT RESET HELLO AUTH READONLY "
            "READWRITE ASKING SYNC PSYNC REPLICAOF SLAVEOF");
        return t;
    }();
    return table;
}

std::string upper(std::string_view text) {
    std::string out(text);
    for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

bool read_length(std::string_view& in, char type, std::size_t& out) {
    if (in.empty() || in.front() != type) return false;
    auto end = in.find("\r\n");
    if (end == std::string_view::npos) return false;
    auto [ptr, ec] = std::from_chars(in.data() + 1, in.data() + end, out);
    if (ec != std::errc{} || ptr != in.data() + end) return false;
    in.remove_prefix(end + 2);
    return true;
}

std::size_t count_of(std::string_view text) {
    std::size_t n = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    return ec == std::errc{} && ptr == text.data() + text.size() ? n : 0;
}

// The positions of the keys under `r`, as a half-open range with a step; `dest` is an
// extra key position (0 for none).
struct key_positions {
    std::size_t first = 0, end = 0, step = 1, dest = 0;
};

key_positions positions(const key_rule& r, const std::vector<std::string_view>& args) {
    auto n = static_cast<int>(args.size());
    switch (r.what) {
        case rule::keys: {
            int last = r.last < 0 ? n + r.last : std::min(r.last, n - 1);
            if (r.first > last) return {};
            return {static_cast<std::size_t>(r.first), static_cast<std::size_t>(last) + 1,
                    static_cast<std::size_t>(r.step)};
        }
        case rule::numkeys:
        case rule::dest_numkeys: {
            if (r.first >= n) return {};
            auto first = static_cast<std::size_t>(r.first) + 1;
            auto end =
                std::min(first + count_of(args[static_cast<std::size_t>(r.first)]), args.size());
            return {first, end, 1, r.what == rule::dest_numkeys ? 1u : 0u};
        }
        case rule::streams: {
            for (std::size_t i = 1; i < args.size(); ++i) {
                if (upper(args[i]) == "STREAMS") {
                    auto count = (args.size() - i - 1) / 2;
                    return {i + 1, i + 1 + count, 1};
                }
            }
            return {};
        }
        default:
            return {};
    }
}

route by_keys(const key_rule& r, const std::vector<std::string_view>& args) {
    auto at = positions(r, args);
    std::optional<std::string_view> first_key;
    route out{route::kind::any};
    auto visit = [&](std::string_view key) {
        auto slot = key_slot(key);
        if (!first_key) {
            first_key = key;
            out = {route::kind::slot, slot};
        } else if (out.what == route::kind::slot && slot != out.slot) {
            out = {route::kind::cross_slot, 0,
                   fmt::format("keys '{}' (slot {}) and '{}' (slot {}) are in different hash "
                               "slots; on a cluster a command's keys must share one (give them "
                               "a hash tag, as in {{tag}}:key)",
                               *first_key, out.slot, key, slot)};
        }
    };
    if (at.dest) visit(args[at.dest]);
    for (auto i = at.first; i < at.end; i += at.step) visit(args[i]);
    return out;
}

}  // namespace

std::vector<std::string_view> command_args(std::string_view payload) {
    std::size_t count = 0;
    if (!read_length(payload, '*', count)) return {};
    std::vector<std::string_view> args;
    args.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        std::size_t len = 0;
        if (!read_length(payload, '$', len) || payload.size() < len + 2) return {};
        args.push_back(payload.substr(0, len));
        payload.remove_prefix(len + 2);
    }
    return args;
}

route route_of(std::string_view payload) {
    auto args = command_args(payload);
    if (args.empty()) return {route::kind::any};
    auto name = upper(args[0]);
    const auto& table = rules();
    auto found = table.find(name);
    if (found == table.end()) {
        // Not in the table: the first argument is taken for the key (it is, for most
        // commands); MOVED corrects the guess when it was not.
        if (args.size() < 2) return {route::kind::any};
        return {route::kind::slot, key_slot(args[1])};
    }
    switch (found->second.what) {
        case rule::any:
            return {route::kind::any};
        case rule::all:
            return {route::kind::all};
        case rule::unsupported:
            return {route::kind::unsupported, 0,
                    fmt::format("{} needs a connection of its own; a cluster connection is shared "
                                "and pipelined, and refuses it",
                                name)};
        default:
            return by_keys(found->second, args);
    }
}

}  // namespace keel::redis::detail
