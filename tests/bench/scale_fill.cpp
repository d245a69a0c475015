// keel_scale_bench's store side: a waiting order read back as a template, its clones and its
// floor, written pipelined. See scale_fill.hpp.

#include "scale_fill.hpp"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <keel/framework/redis/connection.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>

namespace keel::bench {

namespace asio = boost::asio;
using json = nlohmann::json;

std::string waiting_order_id(long n) {
    char text[24];
    std::snprintf(text, sizeof text, "w-%07ld", n);
    return text;
}

namespace {

std::vector<std::string> texts(const redis::reply& r) {
    std::vector<std::string> out;
    for (const auto& e : r.elements()) out.emplace_back(e.text().value_or(""));
    return out;
}

std::string text_of(const redis::reply& r) {
    return std::string(r.text().value_or(""));
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
}

// Every run of exactly 13 digits (milliseconds since the epoch) given to `f`.
template <class F>
std::string map_times(const std::string& text, F f) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
            out += text[i++];
            continue;
        }
        auto end = i;
        while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
        if (end - i == 13)
            out += f(std::stoll(text.substr(i, 13)));
        else
            out.append(text, i, end - i);
        i = end;
    }
    return out;
}

// The elements of a SCAN-family reply's pages, for members matching `pattern`.
std::vector<std::string> scan_all(redis_probe& probe, const std::string& verb,
                                  const std::string& key, const std::string& pattern) {
    std::vector<std::string> out;
    std::string cursor = "0";
    do {
        auto r = probe.command(redis::command(verb, key, cursor, "MATCH", pattern, "COUNT", 1000));
        auto page = r.elements();
        if (page.size() != 2) throw std::runtime_error(verb + " " + key + ": unexpected reply");
        cursor = text_of(page[0]);
        for (auto& t : texts(page[1])) out.push_back(std::move(t));
    } while (cursor != "0");
    return out;
}

}  // namespace

order_template::order_template(redis_probe& probe, std::string id)
    : id_(std::move(id)), instance_("order/" + id_ + "/fulfillment") {
    auto keys = texts(probe.command(redis::command("KEYS", "*")));
    std::sort(keys.begin(), keys.end());
    std::string pattern = "*" + id_ + "*";
    for (const auto& key : keys) {
        auto type = text_of(probe.command(redis::command("TYPE", key)));
        if (key.find(id_) != std::string::npos) {
            own_key_content own{key, type, {}};
            std::vector<std::string> w;
            if (type == "string") {
                w = {"SET", key, text_of(probe.command(redis::command("GET", key)))};
            } else if (type == "hash") {
                w = {"HSET", key};
                for (auto& t : texts(probe.command(redis::command("HGETALL", key))))
                    w.push_back(std::move(t));
            } else if (type == "set") {
                w = {"SADD", key};
                for (auto& t : texts(probe.command(redis::command("SMEMBERS", key))))
                    w.push_back(std::move(t));
            } else if (type == "zset") {
                w = {"ZADD", key};
                auto flat =
                    texts(probe.command(redis::command("ZRANGE", key, 0, -1, "WITHSCORES")));
                for (std::size_t i = 0; i + 1 < flat.size(); i += 2)
                    w.insert(w.end(), {flat[i + 1], flat[i]});
            } else if (type == "list") {
                w = {"RPUSH", key};
                for (auto& t : texts(probe.command(redis::command("LRANGE", key, 0, -1))))
                    w.push_back(std::move(t));
            } else {
                throw std::runtime_error("template: key " + key + " of type " + type);
            }
            own.writes.push_back(std::move(w));
            own_.push_back(std::move(own));
            continue;
        }
        // A shared key: the template's entries in it, if any.
        std::vector<std::string> found;
        if (type == "zset") {
            found = scan_all(probe, "ZSCAN", key, pattern);
            for (std::size_t i = 0; i + 1 < found.size(); i += 2)
                shared_writes_.push_back({"ZADD", key, found[i + 1], found[i]});
        } else if (type == "set") {
            found = scan_all(probe, "SSCAN", key, pattern);
            for (const auto& m : found) shared_writes_.push_back({"SADD", key, m});
        } else if (type == "hash") {
            found = scan_all(probe, "HSCAN", key, pattern);
            for (std::size_t i = 0; i + 1 < found.size(); i += 2)
                shared_writes_.push_back({"HSET", key, found[i], found[i + 1]});
        }
        if (!found.empty()) shared_.push_back({key, type});
    }
    if (own_.empty()) throw std::runtime_error("template: no key holds order " + id_);

    // The floor, from the document, the meta hash and the timers hash.
    std::string doc, doc_key, base;
    std::map<std::string, std::string> meta, timers;
    for (const auto& own : own_) {
        const auto& w = own.writes.front();
        if (own.type == "string" && own.name.ends_with(":doc")) {
            doc = w[2];
            doc_key = own.name;
        }
        auto hash_of = [&](std::map<std::string, std::string>& to) {
            for (std::size_t i = 2; i + 1 < w.size(); i += 2) to[w[i]] = w[i + 1];
        };
        if (own.name.ends_with(":meta")) {
            hash_of(meta);
            base = own.name.substr(0, own.name.find("i:" + instance_));
        }
        if (own.name.ends_with(":timers")) hash_of(timers);
    }
    if (doc.empty() || meta.empty())
        throw std::runtime_error("template: order " + id_ + " has no document or no meta hash");
    json state{{"id", meta["id"]},
               {"definition", meta["definition"]},
               {"params", json::parse(meta["params"])},
               {"status", meta["status"]},
               {"waits", json::parse(meta["waits"])},
               {"timers", timers},
               {"created", std::stoll(meta["created"])}};
    auto record = state.dump();
    floor_.push_back({"SET", doc_key, doc});
    floor_.push_back({"SET", base + "f:" + instance_, record});
    floor_payload_ = doc.size() + record.size();
    for (const auto& wait : state["waits"]) {
        auto path = wait.value("path", "");
        floor_.push_back({"HSET", base + "f:waits", path, instance_});
        floor_payload_ += path.size() + instance_.size();
    }
    for (const auto& [_, value] : timers) {
        floor_.push_back({"ZADD", base + "f:timers", value.substr(0, value.find(' ')), instance_});
        floor_payload_ += 8 + instance_.size();
    }
}

std::string order_template::with_id(const std::string& text, const std::string& id,
                                    std::int64_t shift_ms) const {
    std::string out = text;
    if (id != id_) replace_all(out, id_, id);
    if (shift_ms == 0) return out;
    return map_times(out, [&](std::int64_t ms) { return std::to_string(ms - shift_ms); });
}

argv_list order_template::writes_for(const std::string& id, std::int64_t shift_ms) const {
    argv_list out;
    auto add = [&](const std::vector<std::string>& w) {
        auto& argv = out.emplace_back();
        for (const auto& a : w) argv.push_back(with_id(a, id, shift_ms));
    };
    for (const auto& own : own_)
        for (const auto& w : own.writes) add(w);
    for (const auto& w : shared_writes_) add(w);
    return out;
}

argv_list order_template::floor_writes_for(const std::string& id, std::int64_t shift_ms) const {
    argv_list out;
    for (const auto& w : floor_) {
        auto& argv = out.emplace_back();
        for (const auto& a : w) argv.push_back(with_id(a, id, shift_ms));
    }
    return out;
}

std::vector<std::string> order_template::own_kinds() const {
    std::vector<std::string> out;
    for (const auto& own : own_) {
        auto name = own.name;
        replace_all(name, id_, "<id>");
        out.push_back(name);
    }
    return out;
}

std::string order_template::own_key(std::size_t kind, const std::string& id) const {
    return with_id(own_.at(kind).name, id, 0);
}

std::string order_template::describe(redis_probe& probe, const std::string& id) const {
    auto mask = [&](std::string text) {
        replace_all(text, id, "<id>");
        return map_times(text, [](std::int64_t) { return std::string("<ms>"); });
    };
    std::string out;
    for (std::size_t k = 0; k < own_.size(); ++k) {
        auto key = own_key(k, id);
        auto type = text_of(probe.command(redis::command("TYPE", key)));
        auto encoding = text_of(probe.command(redis::command("OBJECT", "ENCODING", key)));
        std::vector<std::string> items;
        if (type == "string") {
            items = {text_of(probe.command(redis::command("GET", key)))};
        } else if (type == "hash") {
            auto flat = texts(probe.command(redis::command("HGETALL", key)));
            for (std::size_t i = 0; i + 1 < flat.size(); i += 2)
                items.push_back(flat[i] + " = " + flat[i + 1]);
        } else if (type == "set") {
            items = texts(probe.command(redis::command("SMEMBERS", key)));
        } else if (type == "zset") {
            items = texts(probe.command(redis::command("ZRANGE", key, 0, -1, "WITHSCORES")));
        } else if (type == "list") {
            items = texts(probe.command(redis::command("LRANGE", key, 0, -1)));
        }
        if (type != "list" && type != "zset") std::sort(items.begin(), items.end());
        out += mask(key) + " (" + type + ", " + encoding + ")\n";
        for (const auto& item : items) out += "  " + mask(item) + "\n";
    }
    for (const auto& w : shared_writes_) {
        std::vector<std::string> argv;
        for (const auto& a : w) argv.push_back(with_id(a, id, 0));
        std::string value;
        if (argv[0] == "ZADD")
            value = text_of(probe.command(redis::command("ZSCORE", argv[1], argv[3])));
        else if (argv[0] == "SADD")
            value = std::to_string(
                probe.command(redis::command("SISMEMBER", argv[1], argv[2])).integer().value_or(0));
        else
            value = text_of(probe.command(redis::command("HGET", argv[1], argv[2])));
        out += mask(argv[1]) + " entry " + mask(argv.back()) + ": " + mask(value) + "\n";
    }
    return out;
}

double pipelined_fill(const std::string& url, long first, long last, int concurrency,
                      const std::function<argv_list(long)>& writes) {
    asio::io_context io;
    redis::connection_options options;
    options.url = url;
    options.health_check_interval = std::chrono::milliseconds(0);
    options.request_timeout = std::chrono::milliseconds(120'000);
    options.silence_timeout = std::chrono::milliseconds(120'000);
    options.client_name = "scale-fill";
    auto c = redis::connection::create(io.get_executor(), options);
    if (!c) throw std::runtime_error("fill: " + c.error().what());
    long next = first;
    std::string failure;
    int running = concurrency;
    auto worker = [&]() -> asio::awaitable<void> {
        while (next < last && failure.empty()) {
            auto argvs = writes(next++);
            for (const auto& argv : argvs) {
                auto cmd = redis::command::from_args(std::span<const std::string>(argv));
                auto r = co_await c->execute(std::move(cmd));
                if (!r && failure.empty())
                    failure = argv[0] + " " + argv[1] + ": " + r.error().what();
                if (!r) co_return;
            }
        }
    };
    auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < concurrency; ++i)
        asio::co_spawn(io, worker(), [&](std::exception_ptr e) {
            --running;
            if (e && failure.empty()) failure = "a fill worker threw";
        });
    while (running > 0) io.run_one();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    c->close();
    if (!failure.empty()) throw std::runtime_error("fill: " + failure);
    return seconds;
}

double used_memory(redis_probe& probe) {
    return info_field(probe.info("memory"), "used_memory");
}

std::map<std::string, double> memory_stats(redis_probe& probe) {
    std::map<std::string, double> out;
    auto add = [&](const std::string& prefix, const redis::reply& r, auto& self) -> void {
        auto e = r.elements();
        for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
            auto name = prefix + text_of(e[i]);
            if (auto v = e[i + 1].integer())
                out[name] = static_cast<double>(*v);
            else if (e[i + 1].is_array())
                self(name + ".", e[i + 1], self);
        }
    };
    add("", probe.command(redis::command("MEMORY", "STATS")), add);
    return out;
}

double memory_usage(redis_probe& probe, const std::string& key) {
    auto r = probe.command(redis::command("MEMORY", "USAGE", key, "SAMPLES", 0));
    return static_cast<double>(r.integer().value_or(0));
}

}  // namespace keel::bench
