// The floor of an order flow: 11 round trips on keel::redis::connection, written as
// keel-orders writes them. See flow_floor.hpp for what each one is and why it is the floor.

#include "flow_floor.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <keel/framework/redis/connection.hpp>
#include <keel/process/redis_store.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace keel::bench {

namespace {

namespace asio = boost::asio;
using json = nlohmann::json;

// KEYS: meta, the shard's timer index. ARGV: id, definition, params, wait set, timer
// ("<seq> <due ms> <name>"), due ms, now ms. Idempotent: a second start changes nothing.
const redis::script start_script(R"lua(
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'definition', ARGV[2], 'params', ARGV[3],
           'status', 'suspended', 'waits', ARGV[4], 'timers', ARGV[5], 'created', ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
return 1
)lua");

// KEYS: meta, journal, inbox, the shard's timer index. ARGV: id, status, wait set, consumed
// inbox field or '', drop the timer (1/0), result or '', then the journal entries.
const redis::script commit_script(R"lua(
if ARGV[4] ~= '' then redis.call('HDEL', KEYS[3], ARGV[4]) end
if ARGV[5] == '1' then
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[1], 'timers')
end
redis.call('RPUSH', KEYS[2], unpack(ARGV, 7))
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'status', ARGV[2], 'waits', ARGV[3], 'result', ARGV[6])
else
  redis.call('HSET', KEYS[1], 'status', ARGV[2], 'waits', ARGV[3])
end
return 1
)lua");

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The keys and payloads of one order's flow, as keel-orders and its store spell them.
struct flow_data {
    explicit flow_data(std::string order_id)
        : id(std::move(order_id)), instance("order/" + id + "/fulfillment") {
        doc = "keel:{order:" + id + "}:doc";
        auto base = fmt::format("keel:{{{}}}:", keel::process::shard_of(instance, 16));
        wake = base + "wake";
        meta = base + "i:" + instance + ":meta";
        journal = base + "i:" + instance + ":journal";
        inbox = base + "i:" + instance + ":inbox";
    }

    std::string order(const std::string& status, bool paid) const {
        json payments = json::array();
        if (paid) payments.push_back({{"amount", 9.5}, {"transactionId", "tx-" + id}});
        return json{{"id", id},
                    {"email", id + "@example.com"},
                    {"address", "1 Load Lane"},
                    {"total", 9.5},
                    {"status", status},
                    {"payments", payments},
                    {"refunds", json::array()}}
            .dump();
    }
    std::string paid_path() const { return "/payment/" + id + "/received"; }
    std::string delivered_path() const { return "/shipping/" + id + "/delivered"; }
    std::string paid_key() const {
        auto key = "payment/tx-" + id;
        return std::to_string(key.size()) + ":" + key + " " + paid_path();
    }
    std::string delivered_key() const {
        auto key = "delivered/" + id;
        return std::to_string(key.size()) + ":" + key + " " + delivered_path();
    }
    json payment() const { return {{"amount", 9.5}, {"transactionId", "tx-" + id}}; }

    std::string id, instance, doc, wake, meta, journal, inbox;
};

std::string signal_json(const std::string& key, const std::string& path, const json& payload,
                        std::int64_t at) {
    return json{{"path", path}, {"payload", payload}, {"at", at}, {"key", key}}.dump();
}

std::string entry(std::uint64_t seq, const std::string& kind, const std::string& name,
                  const json& value, std::int64_t at, std::optional<std::int64_t> started = {}) {
    json e{{"seq", seq}, {"kind", kind}, {"name", name}, {"value", value}, {"at", at}};
    if (started) e["started"] = *started;
    return e.dump();
}

class floor_runner {
  public:
    floor_runner(redis::connection& c, const floor_options& o)
        : redis_(c), options_(o), started_(std::chrono::steady_clock::now()) {}

    asio::awaitable<void> worker() {
        while (next_ < options_.flows) {
            int n = next_++;
            co_await start_of(n);
            try {
                co_await flow(flow_data("load-" + std::to_string(n)));
                ++completed_;
            } catch (const std::exception& e) {
                if (failed_++ == 0) first_error_ = e.what();
            }
        }
    }

    int completed() const { return completed_; }
    int failed() const { return failed_; }
    const std::string& first_error() const { return first_error_; }

  private:
    // Waits for flow n's slot when the floor is paced.
    asio::awaitable<void> start_of(int n) {
        if (options_.pace <= 0) co_return;
        asio::steady_timer slot(co_await asio::this_coro::executor);
        slot.expires_at(started_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(n / options_.pace)));
        co_await slot.async_wait(asio::use_awaitable);
    }

    asio::awaitable<std::int64_t> send(redis::command cmd) {
        auto r = co_await redis_.execute(std::move(cmd));
        if (!r) throw std::runtime_error(r.error().what());
        if (r->is_error()) throw std::runtime_error(r->to_debug_string());
        co_return r->integer().value_or(1);
    }

    asio::awaitable<void> script(const redis::script& s, std::vector<std::string> keys,
                                 std::vector<std::string> args) {
        auto r = co_await redis_.eval(s, keys, args);
        if (!r) throw std::runtime_error(r.error().what());
        if (r->integer() != 1) throw std::runtime_error("script: " + r->to_debug_string());
    }

    // The entries are named before each co_await: see "Toolchain traps" in architecture.md.
    asio::awaitable<void> commit(const flow_data& f, std::vector<std::string> args,
                                 std::vector<std::string> entries) {
        args.insert(args.end(), entries.begin(), entries.end());
        std::vector<std::string> keys{f.meta, f.journal, f.inbox, f.wake};
        co_await script(commit_script, std::move(keys), std::move(args));
    }

    asio::awaitable<void> deliver(const flow_data& f, std::string key, std::string path,
                                  json payload) {
        auto signal = signal_json(key, path, payload, now_ms());
        if (co_await send(redis::command("HSETNX", f.inbox, key, signal)) != 1)
            throw std::runtime_error("signal delivered twice");
    }

    asio::awaitable<void> start(const flow_data& f) {
        auto now = now_ms();
        auto due = std::to_string(now + 72 * 3600 * 1000);
        json waits = json::array({{{"seq", 1}, {"path", f.paid_path()}},
                                  {{"seq", 2}, {"path", "/payment/" + f.id + "/failed"}}});
        std::vector<std::string> keys{f.meta, f.wake};
        std::vector<std::string> args{
            f.instance,         "/order/:order/fulfillment",     json::array({f.id}).dump(),
            waits.dump(),       "3 " + due + " payment timeout", due,
            std::to_string(now)};
        co_await script(start_script, std::move(keys), std::move(args));
    }

    // Steps 5 and 6: "record payment", its commit consuming the payment signal.
    asio::awaitable<void> record_payment(const flow_data& f) {
        auto began = now_ms();
        co_await send(redis::command("SET", f.doc, f.order("paid", true)));
        json signal{{"id", 1}, {"payload", f.payment()}};
        std::vector<std::string> args{f.instance, "running", "[]", f.paid_key(), "1", ""};
        std::vector<std::string> entries{entry(1, "signal", f.paid_path(), signal, began),
                                         entry(0, "race", "", 0, began),
                                         entry(4, "run", "record payment", true, now_ms(), began)};
        co_await commit(f, std::move(args), std::move(entries));
    }

    // Steps 7 and 8: "dispatch", its commit suspending for the delivery.
    asio::awaitable<void> dispatch(const flow_data& f) {
        auto began = now_ms();
        co_await send(redis::command("SET", f.doc, f.order("shipped", true)));
        json waits = json::array({{{"seq", 6}, {"path", f.delivered_path()}}});
        std::vector<std::string> args{f.instance, "suspended", waits.dump(), "", "0", ""};
        std::vector<std::string> entries{entry(5, "run", "dispatch", true, now_ms(), began)};
        co_await commit(f, std::move(args), std::move(entries));
    }

    // Steps 10 and 11: "mark delivered" and the final commit consuming the delivered signal.
    asio::awaitable<void> finish(const flow_data& f) {
        auto began = now_ms();
        co_await send(redis::command("SET", f.doc, f.order("delivered", true)));
        json signal{{"id", 2}, {"payload", nullptr}};
        json result{{"status", "completed"}};
        std::vector<std::string> args{f.instance,        "completed", "[]",
                                      f.delivered_key(), "0",         result.dump()};
        std::vector<std::string> entries{entry(6, "signal", f.delivered_path(), signal, began),
                                         entry(7, "run", "mark delivered", true, now_ms(), began)};
        co_await commit(f, std::move(args), std::move(entries));
    }

    asio::awaitable<void> flow(const flow_data& f) {
        co_await send(redis::command("SET", f.doc, f.order("created", false), "NX"));
        co_await start(f);
        co_await send(redis::command("SET", f.doc, f.order("created", true)));
        co_await deliver(f, f.paid_key(), f.paid_path(), f.payment());
        co_await record_payment(f);
        co_await dispatch(f);
        json no_payload;
        co_await deliver(f, f.delivered_key(), f.delivered_path(), no_payload);
        co_await finish(f);
    }

    redis::connection& redis_;
    const floor_options& options_;
    std::chrono::steady_clock::time_point started_;
    int next_ = 0;
    int completed_ = 0;
    int failed_ = 0;
    std::string first_error_;
};

}  // namespace

flow_floor::flow_floor(floor_options options) : options_(std::move(options)) {
    redis::connection_options co;
    co.url = options_.redis_url;
    auto c = redis::connection::create(io_.get_executor(), co);
    if (!c) throw std::runtime_error("floor: " + c.error().what());
    connection_.emplace(std::move(*c));
    connection_->add_script(start_script);
    connection_->add_script(commit_script);
    // Connected, scripts loaded: nothing of the set-up falls into the measured phase.
    std::optional<expected<void, redis::error>> ready;
    asio::co_spawn(
        io_, [&]() -> asio::awaitable<void> { ready = co_await connection_->ping(); },
        asio::detached);
    while (!ready) io_.run_one();
    if (!*ready) throw std::runtime_error("floor: " + ready->error().what());
}

flow_floor::~flow_floor() {
    if (connection_) connection_->close();
}

floor_outcome flow_floor::run() {
    floor_runner runner(*connection_, options_);
    auto before = connection_->stats();
    auto started = std::chrono::steady_clock::now();
    int running = options_.concurrency;
    for (int i = 0; i < options_.concurrency; ++i)
        asio::co_spawn(io_, runner.worker(), [&](std::exception_ptr) { --running; });
    io_.restart();
    while (running > 0) io_.run_one();
    floor_outcome out;
    out.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    auto after = connection_->stats();
    out.requests = after.requests - before.requests;
    out.writes = after.writes - before.writes;
    out.completed = runner.completed();
    out.failed = runner.failed();
    out.first_error = runner.first_error();
    return out;
}

}  // namespace keel::bench
