// Typed signals end to end on the engine: binding by model type, buffering before the
// handler waits, idempotent emits, fan-out to several instances, ordering under concurrent
// emitters, parameters given where the handler waits, and payload checks. Runs on the
// in-memory store and (keel_signals_redis_tests) on a real redis-server.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <functional>
#include <keel/process/forwarding_store.hpp>
#include <keel/signals/signal.hpp>
#include <set>
#include <thread>

#include "../process/harness.hpp"

namespace keel::signals {
namespace {

using namespace std::chrono_literals;
using process::context;
using process::durable;
using process::instance_status;
using process::test::harness;

struct order {
    static constexpr std::string_view model_name = "order";
};
struct parcel {
    static constexpr std::string_view model_name = "parcel";
};
struct user {
    static constexpr std::string_view model_name = "user";
};

struct payment_received {
    std::string tx;
    double amount = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(payment_received, tx, amount)
};

struct payment_signals : signal_group {
    signal<payment_received, order> received{this, "/payment/:order/received"};
    signal<void, order> failed{this, "/payment/:order/failed"};
    signal<int, order> tick{this, "/payment/:order/tick"};
};

struct shipping_signals : signal_group {
    signal<void, order> dispatched{this, "/shipping/:order/dispatched"};
    signal<std::string, order, parcel> parcel_delivered{
        this, "/shipping/:order/parcel/:parcel/delivered"};
    signal<void, parcel> lost{this, "/shipping/parcel/:parcel/lost"};
};

struct deps {
    payment_signals payments;
    shipping_signals shipping;
    template <class T>
    T& get() {
        if constexpr (std::is_same_v<T, payment_signals>)
            return payments;
        else
            return shipping;
    }
};

// Waits an hour first, so signals emitted right after the start arrive before the wait.
durable<std::string> pay(context& ctx, ref<order> o, payment_signals& payments,
                         shipping_signals& shipping) {
    co_await ctx.sleep(1h);
    auto r = co_await ctx.race(payments.received, payments.failed, ctx.timer(72h));
    if (r.is(payments.failed)) co_return o.id() + " failed";
    if (!r.is(payments.received)) co_return o.id() + " timeout";
    payment_received p = r.get(payments.received);
    co_await ctx.wait(shipping.dispatched);
    auto note = co_await ctx.wait(shipping.parcel_delivered, ref<parcel>("p-1"));
    co_return o.id() + " " + p.tx + " " + note;
}
inline constexpr auto payment_flow = process::define<pay>("/order/:order/payment");

// A user process that injects the payment signals but binds none of them.
durable<void> welcome(context& ctx, ref<user>, payment_signals&) {
    co_await ctx.sleep(24h);
}
inline constexpr auto welcome_flow = process::define<welcome>("/user/:user/welcome");

// Binds :order from its second parameter.
durable<double> refund(context& ctx, ref<user>, ref<order>, payment_signals& payments) {
    auto p = co_await ctx.wait(payments.received);
    co_return p.amount;
}
inline constexpr auto refund_flow = process::define<refund>("/user/:user/refund/:order");

// Collects n ticks.
durable<std::vector<int>> collect(context& ctx, ref<order>, int n, payment_signals& payments) {
    std::vector<int> seen;
    for (int i = 0; i < n; ++i) seen.push_back(co_await ctx.wait(payments.tick));
    co_return seen;
}
inline constexpr auto collect_flow = process::define<collect>("/order/:order/collect/:n");

struct signals_test : ::testing::Test {
    harness h;
    deps d;
    void SetUp() override {
        h.eng->add(payment_flow, d);
        h.eng->add(welcome_flow, d);
        h.eng->add(refund_flow, d);
        h.eng->add(collect_flow, d);
    }
    template <class T>
    T sync(asio::awaitable<T> a) {
        return h.sync(std::move(a));
    }
};

TEST_F(signals_test, adding_a_process_attaches_its_groups) {
    EXPECT_TRUE(d.payments.attached());
    EXPECT_TRUE(d.shipping.attached());
}

TEST_F(signals_test, a_signal_emitted_before_the_wait_is_buffered_then_consumed) {
    auto handle = sync(h.eng->start(payment_flow, ref<order>("o-1")));
    ref<order> o("o-1");
    auto r = sync(d.payments.received.emit(o, payment_received{"tx-1", 10}));
    EXPECT_EQ(r, (emit_result{1, false}));
    EXPECT_EQ(sync(d.shipping.dispatched.emit(o)), (emit_result{1, false}));
    EXPECT_EQ(h.snapshot(handle.id()).inbox.size(), 2u);  // the handler still sleeps
    h.advance(1h);
    EXPECT_TRUE(h.snapshot(handle.id()).inbox.empty());
    EXPECT_EQ(h.status(handle.id()), instance_status::suspended);  // waits for the parcel
    auto parcel_r = sync(
        d.shipping.parcel_delivered.emit(o, ref<parcel>("p-1"), std::string("left at the door")));
    EXPECT_EQ(parcel_r.reached, 1u);
    auto result = sync(handle.wait());
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(*result, "o-1 tx-1 left at the door");
}

TEST_F(signals_test, an_emit_nobody_subscribed_to_reaches_zero) {
    sync(h.eng->start(payment_flow, ref<order>("o-1")));
    EXPECT_EQ(sync(d.payments.failed.emit(ref<order>("o-2"))), (emit_result{0, false}));
    // A signal no process binds (the parcel alone) reaches nobody either.
    EXPECT_EQ(sync(d.shipping.lost.emit(ref<parcel>("p-1"))), (emit_result{0, false}));
}

TEST_F(signals_test, the_same_idempotency_key_delivers_once_and_answers_the_same) {
    auto handle = sync(h.eng->start(payment_flow, ref<order>("o-1")));
    ref<order> o("o-1");
    auto first = sync(d.payments.received.emit(o, payment_received{"tx-1", 10}, {.key = "tx-1"}));
    auto second = sync(d.payments.received.emit(o, payment_received{"tx-1", 10}, {.key = "tx-1"}));
    EXPECT_EQ(first, (emit_result{1, false}));
    EXPECT_EQ(second, (emit_result{1, true}));
    EXPECT_EQ(h.snapshot(handle.id()).inbox.size(), 1u);
}

asio::awaitable<void> emit_payment(payment_signals& payments, ref<order> o, emit_result& out,
                                   int& done) {
    emit_options options{.key = "tx-1"};
    payment_received payment{"tx-1", 10};
    out = co_await payments.received.emit(o, payment, options);
    ++done;
}

// The same webhook retried while the first attempt is still emitting: both are sent before
// either is answered. One delivers; the other is told it is a duplicate (the memo is read
// and written with the delivery, atomically).
TEST_F(signals_test, two_emits_racing_with_one_key_deliver_once_and_one_is_the_duplicate) {
    auto handle = sync(h.eng->start(payment_flow, ref<order>("o-1")));
    ref<order> o("o-1");
    int done = 0;
    emit_result results[2];
    for (auto& r : results)
        asio::co_spawn(h.io, emit_payment(d.payments, o, r, done), asio::detached);
    h.settle();
    ASSERT_EQ(done, 2);
    EXPECT_EQ(results[0].reached, 1u);
    EXPECT_EQ(results[1].reached, 1u);
    EXPECT_NE(results[0].duplicate, results[1].duplicate);
    auto snap = h.snapshot(handle.id());
    auto received = std::count_if(snap.journal.begin(), snap.journal.end(),
                                  [](const auto& e) { return e.kind == process::op_kind::signal; });
    EXPECT_EQ(received + static_cast<std::ptrdiff_t>(snap.inbox.size()), 1);
}

// A transaction id reused by another order, or a key reused on another signal, is a new
// emit: keys are scoped to the concrete signal path.
TEST_F(signals_test, a_key_is_scoped_to_the_signal_and_its_entities) {
    auto a = sync(h.eng->start(payment_flow, ref<order>("o-a")));
    auto b = sync(h.eng->start(payment_flow, ref<order>("o-b")));
    emit_options once{.key = "tx-1"};
    EXPECT_EQ(sync(d.payments.received.emit(ref<order>("o-a"), {"tx-1", 10}, once)),
              (emit_result{1, false}));
    EXPECT_EQ(sync(d.payments.received.emit(ref<order>("o-b"), {"tx-1", 10}, once)),
              (emit_result{1, false}));
    EXPECT_EQ(sync(d.payments.failed.emit(ref<order>("o-a"), once)), (emit_result{1, false}));
    // The retried webhook is still a duplicate.
    EXPECT_EQ(sync(d.payments.received.emit(ref<order>("o-a"), {"tx-1", 10}, once)),
              (emit_result{1, true}));
    EXPECT_EQ(h.snapshot(a.id()).inbox.size(), 2u);
    EXPECT_EQ(h.snapshot(b.id()).inbox.size(), 1u);
}

TEST_F(signals_test, a_long_key_is_remembered_by_its_hash_and_an_absurd_one_refused) {
    auto handle = sync(h.eng->start(payment_flow, ref<order>("o-1")));
    ref<order> o("o-1");
    emit_options long_key{.key = std::string(max_key_bytes, 'k')};
    EXPECT_EQ(sync(d.payments.tick.emit(o, 1, long_key)), (emit_result{1, false}));
    EXPECT_EQ(sync(d.payments.tick.emit(o, 1, long_key)), (emit_result{1, true}));
    auto inbox = h.snapshot(handle.id()).inbox;
    ASSERT_EQ(inbox.size(), 1u);
    EXPECT_TRUE(inbox[0].key.starts_with("sha256:")) << inbox[0].key;
    EXPECT_EQ(inbox[0].key.size(), 71u);
    emit_options absurd{.key = std::string(max_key_bytes + 1, 'k')};
    EXPECT_THROW(sync(d.payments.tick.emit(o, 2, absurd)), emit_error);
    EXPECT_EQ(h.snapshot(handle.id()).inbox.size(), 1u);
}

TEST_F(signals_test, a_key_is_forgotten_after_the_window_but_never_redelivered_to_an_inbox) {
    if (!h.memory()) GTEST_SKIP() << "the Redis window runs on Redis's own clock";
    auto first = sync(h.eng->start(payment_flow, ref<order>("o-1")));
    ref<order> o("o-1");
    sync(d.payments.tick.emit(o, 1, {.key = "k"}));
    h.clock.advance(25h);
    auto second = sync(h.eng->start(refund_flow, ref<user>("ann"), o));
    // Both are reached; the instance that had the key does not get it twice.
    EXPECT_EQ(sync(d.payments.tick.emit(o, 2, {.key = "k"})), (emit_result{2, false}));
    EXPECT_EQ(h.snapshot(first.id()).inbox.size(), 1u);
    EXPECT_EQ(h.snapshot(second.id()).inbox.size(), 1u);
}

TEST_F(signals_test, signals_bind_by_model_type_across_groups_and_processes) {
    sync(h.eng->start(payment_flow, ref<order>("o-1")));
    sync(h.eng->start(welcome_flow, ref<user>("ann")));
    auto refund_h = sync(h.eng->start(refund_flow, ref<user>("ann"), ref<order>("o-1")));
    sync(h.eng->start(refund_flow, ref<user>("bob"), ref<order>("o-2")));
    // The payment process and ann's refund bind :order = o-1; the welcome process binds
    // nothing of it; bob's refund is about another order.
    auto r = sync(d.payments.received.emit(ref<order>("o-1"), payment_received{"tx-9", 4.5}));
    EXPECT_EQ(r.reached, 2u);
    auto amount = sync(refund_h.wait());
    ASSERT_TRUE(amount.has_value()) << amount.error().message;
    EXPECT_DOUBLE_EQ(*amount, 4.5);
    // A group the process shares with another (shipping) binds through the same parameter.
    EXPECT_EQ(sync(d.shipping.dispatched.emit(ref<order>("o-1"))).reached, 1u);
}

TEST_F(signals_test, a_finished_instance_is_no_longer_reached) {
    auto handle = sync(h.eng->start(refund_flow, ref<user>("ann"), ref<order>("o-1")));
    sync(d.payments.received.emit(ref<order>("o-1"), payment_received{"tx-1", 1}));
    ASSERT_TRUE(sync(handle.wait()).has_value());
    EXPECT_EQ(sync(d.payments.received.emit(ref<order>("o-1"), payment_received{"tx-2", 1})),
              (emit_result{0, false}));
    // On Redis its subscriptions went with its final commit (an empty set is no key).
    if (auto* redis = dynamic_cast<process::test::redis_backend*>(h.backend.get())) {
        EXPECT_EQ(redis->server.cli({"--scan", "--pattern", "keel:*:sub:*"}), "");
    }
}

// On Redis a signal key's subscribers are a hash (store level 4), but a start beside a live
// worker of an earlier build, which reads only sets, writes a key it makes as a set; a key
// keeps the form it has. Emits reach the instances in either form, and their ends take them
// out. (On the memory store only the reach is checked.)
TEST_F(signals_test, subscriptions_are_written_as_sets_only_beside_an_earlier_build) {
    auto* redis = dynamic_cast<process::test::redis_backend*>(h.backend.get());
    auto id_of = [](const std::string& who, const std::string& what) {
        return "user/" + who + "/refund/" + what;
    };
    // The key of an instance's subscription to `path` (the harness's store has 4 shards).
    auto key_of = [&](const std::string& id, const std::string& path) {
        return redis->s.subscription_key(process::shard_of(id, 4), path);
    };
    // A user whose refund of `order` lands in the same shard as `id`'s.
    auto beside = [&](const std::string& id, const std::string& what) {
        for (int i = 0;; ++i) {
            auto who = "u" + std::to_string(i);
            if (process::shard_of(id_of(who, what), 4) == process::shard_of(id, 4)) return who;
        }
    };
    auto start = [&](const std::string& who, const std::string& what) {
        return sync(h.eng->start(refund_flow, ref<user>(who), ref<order>(what)));
    };
    std::vector<process::handle<double>> handles;
    handles.push_back(start("ann", "o-1"));
    auto now = h.clock.now();
    sync(h.store.announce(process::worker_record{
        "old", {}, now, now + 1min, process::store_level_compact_subscriptions - 1}));
    h.advance(5s);  // the engine's next heartbeat sees it
    handles.push_back(start("bob", "o-2"));
    handles.push_back(start(beside(id_of("ann", "o-1"), "o-1"), "o-1"));
    h.advance(2min);  // the old worker's announcement lapses
    handles.push_back(start(beside(id_of("bob", "o-2"), "o-2"), "o-2"));
    handles.push_back(start("dan", "o-3"));
    if (redis) {
        auto type = [&](const std::string& key) { return redis->server.cli({"TYPE", key}); };
        auto ann = key_of(id_of("ann", "o-1"), "/payment/o-1/received");
        auto bob = key_of(id_of("bob", "o-2"), "/payment/o-2/failed");
        EXPECT_EQ(type(ann), "hash") << "ann's, before the old worker came";
        EXPECT_EQ(redis->server.cli({"OBJECT", "ENCODING", ann}), "listpack");
        EXPECT_EQ(redis->server.cli({"HLEN", ann}), "2") << "a hash stays one beside it";
        EXPECT_EQ(type(bob), "set") << "bob's, beside the old worker";
        EXPECT_EQ(redis->server.cli({"SCARD", bob}), "2") << "a set stays one after it left";
        EXPECT_EQ(type(key_of(id_of("dan", "o-3"), "/payment/o-3/tick")), "hash");
    }
    EXPECT_EQ(sync(d.payments.received.emit(ref<order>("o-1"), payment_received{"tx-1", 1})),
              (emit_result{2, false}));
    EXPECT_EQ(sync(d.payments.received.emit(ref<order>("o-2"), payment_received{"tx-2", 2})),
              (emit_result{2, false}));
    EXPECT_EQ(sync(d.payments.received.emit(ref<order>("o-3"), payment_received{"tx-3", 3})),
              (emit_result{1, false}));
    for (auto& handle : handles) {
        auto amount = sync(handle.wait());
        ASSERT_TRUE(amount.has_value()) << amount.error().message;
    }
    if (redis) EXPECT_EQ(redis->server.cli({"--scan", "--pattern", "keel:*:sub:*"}), "");
}

asio::awaitable<void> emit_tick(payment_signals& payments, ref<order> o, int i, emit_result& out,
                                int& done) {
    emit_options options{.key = "tick-" + std::to_string(i)};
    out = co_await payments.tick.emit(o, i, options);
    ++done;
}

TEST_F(signals_test, fifty_concurrent_emitters_are_all_delivered_in_arrival_order) {
    auto handle = sync(h.eng->start(collect_flow, ref<order>("o-1"), 50));
    ref<order> o("o-1");
    int done = 0;
    std::vector<emit_result> results(50);
    for (int i = 0; i < 50; ++i)
        asio::co_spawn(h.io, emit_tick(d.payments, o, i, results[i], done), asio::detached);
    h.settle();
    ASSERT_EQ(done, 50);
    for (const auto& r : results) EXPECT_EQ(r, (emit_result{1, false}));
    auto seen = sync(handle.wait());
    ASSERT_TRUE(seen.has_value()) << seen.error().message;
    EXPECT_EQ(std::set<int>(seen->begin(), seen->end()).size(), 50u);
    // Consumed oldest first: the inbox ids in the journal only grow.
    std::uint64_t last = 0;
    for (const auto& e : h.snapshot(handle.id()).journal) {
        if (e.kind != process::op_kind::signal) continue;
        auto id = e.value.at("id").get<std::uint64_t>();
        EXPECT_GT(id, last);
        last = id;
    }
}

struct from_elsewhere {
    std::atomic<bool> done{false};
    emit_result reached;
    std::optional<process::instance_info> info;
};

// A named coroutine, not a capturing lambda: see "Toolchain traps" in docs/architecture.md.
asio::awaitable<void> start_and_emit(process::engine& eng, payment_signals& payments,
                                     from_elsewhere& out) {
    ref<user> ann("ann");
    ref<order> o1("o-1");
    auto handle = co_await eng.start(refund_flow, ann, o1);
    payment_received payment{"tx-1", 2.5};  // named: no braced temporary beside a co_await
    out.reached = co_await payments.received.emit(o1, payment);
    co_await handle.wait();
    out.info = co_await eng.describe(handle.id());
    out.done = true;
}

TEST_F(signals_test, emit_and_start_may_be_awaited_from_another_thread) {
    asio::io_context other;
    from_elsewhere out;
    asio::co_spawn(other, start_and_emit(*h.eng, d.payments, out), asio::detached);
    std::thread t([&] { other.run(); });
    for (int i = 0; i < 10'000 && !out.done; ++i) {
        h.settle();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    t.join();
    ASSERT_TRUE(out.done);
    EXPECT_EQ(out.reached, (emit_result{1, false}));
    ASSERT_TRUE(out.info.has_value());
    EXPECT_EQ(out.info->status, instance_status::completed);
    EXPECT_EQ(out.info->result, nlohmann::json(2.5));
}

TEST_F(signals_test, a_payload_that_does_not_parse_is_rejected_and_nothing_delivered) {
    auto handle = sync(h.eng->start(payment_flow, ref<order>("o-1")));
    nlohmann::json bad = {{"tx", 5}};
    EXPECT_THROW(sync(d.payments.received.emit_json("/payment/o-1/received", bad)), emit_error);
    EXPECT_THROW(sync(d.payments.received.emit_json("/payment/o-1/paid", nlohmann::json::object())),
                 emit_error);
    EXPECT_TRUE(h.snapshot(handle.id()).inbox.empty());
    nlohmann::json good = {{"tx", "tx-1"}, {"amount", 3}};
    EXPECT_EQ(sync(d.payments.received.emit_json("/payment/o-1/received", good)).reached, 1u);
}

TEST_F(signals_test, a_parameter_that_is_not_a_path_segment_is_an_emit_error) {
    EXPECT_THROW(sync(d.payments.failed.emit(ref<order>("a/b"))), emit_error);
    EXPECT_THROW(sync(d.payments.failed.emit(ref<order>(""))), emit_error);
}

TEST(signal_groups, a_group_without_an_engine_cannot_emit) {
    asio::io_context io;
    payment_signals lonely;
    std::exception_ptr error;
    asio::co_spawn(io, lonely.failed.emit(ref<order>("o-1")),
                   [&](std::exception_ptr e, emit_result) { error = e; });
    io.run();
    ASSERT_TRUE(error);
    EXPECT_THROW(std::rethrow_exception(error), emit_error);
}

TEST(signal_groups, find_matches_a_concrete_path) {
    payment_signals g;
    std::vector<std::string> values;
    EXPECT_EQ(g.find("/payment/o-7/failed", values), &g.failed);
    EXPECT_EQ(values, std::vector<std::string>{"o-7"});
    EXPECT_EQ(g.find("/payment/o-7", values), nullptr);
}

TEST(signal_groups, subscription_keys_cover_every_partial_binding) {
    auto keys = subscription_keys("/s/:a/x/:b", {"1", "2"});
    EXPECT_EQ(keys, (std::vector<std::string>{"/s/1/x/2", "/s/*/x/2", "/s/1/x/*"}));
    EXPECT_EQ(subscription_keys("/ping", {}), std::vector<std::string>{"/ping"});
}

durable<void> transfer(context& ctx, ref<order>, ref<order>, payment_signals&) {
    co_await ctx.sleep(1h);
}
inline constexpr auto transfer_flow = process::define<transfer>("/transfer/:from/:to");

TEST(signal_groups, an_ambiguous_binding_fails_at_start_up_naming_the_signal) {
    harness h;
    deps d;
    try {
        h.eng->add(transfer_flow, d);
        FAIL() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("/payment/:order/received"), std::string::npos)
            << e.what();
    }
}

// ---- an emit landing while the instance's worker releases it ----

// Runs `between` once, right after a commit that releases an instance and before its worker
// hears back: where an emit from another thread (or another worker's) can land.
struct release_window_store final : process::forwarding_store {
    using forwarding_store::forwarding_store;
    std::function<asio::awaitable<void>()> between;
    asio::awaitable<expected<process::commit_result, process::store_error>> commit(
        process::commit_request req) override {
        bool releasing = req.release;
        auto r = co_await forwarding_store::commit(std::move(req));
        if (releasing && r && between) co_await std::exchange(between, nullptr)();
        co_return r;
    }
};

durable<int> open_then_tick(context& ctx, ref<order>, payment_signals& payments) {
    co_await ctx.run("open", [] { return 0; });
    co_return co_await ctx.wait(payments.tick);
}
inline constexpr auto open_then_tick_flow = process::define<open_then_tick>("/order/:order/open");

// The emit's fan-out finds the instance suspended and released, and takes it for this worker,
// whose driver still holds the lease it has just given up: the instance must run on at once,
// not sit under the emit's lease until that expires.
TEST(signals_release_window, an_emit_taking_an_instance_its_worker_is_releasing_resumes_it) {
    harness h;
    h.eng.reset();
    release_window_store window(h.store);
    deps d;
    process::engine eng(h.io.get_executor(), window, h.clock, {.worker = "w1", .seed = 42});
    eng.add(open_then_tick_flow, d);
    eng.run();
    ref<order> o("o-w");
    window.between = [&]() -> asio::awaitable<void> {
        auto sent = co_await d.payments.tick.emit(o, 7);
        EXPECT_EQ(sent.reached, 1u);
    };
    auto handle = h.sync(eng.start(open_then_tick_flow, o));
    h.settle();
    EXPECT_FALSE(window.between);  // the emit landed in the window
    ASSERT_EQ(h.status(handle.id()), instance_status::completed);
    EXPECT_EQ(*h.sync(handle.wait()), 7);
    eng.stop();
    h.settle();
}

}  // namespace
}  // namespace keel::signals
