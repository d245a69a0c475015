// An entity changed with a signal emitted (signal::update_and_emit) or a process started
// (engine::update_and_start, create_and_start), both or neither. On the Redis store with the
// documents on the same connection (on_redis.*) the write travels with the emit's fan-out or
// the start; on the in-memory store and on a cluster it is repository<T>::update, then the
// emit or start. Either way the caller sees the same: the change applied once to the entity
// as it is, the signal delivered once and the instance started once, also when another
// writer changed the entity between the read and the write.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <keel/framework/repository.hpp>
#include <keel/signals/signal.hpp>

#include "harness.hpp"
#include "watched_documents.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;
using test::watched_documents;

struct wallet {
    static constexpr std::string_view model_name = "wallet";
    int balance = 0;
    std::vector<std::string> txs;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(wallet, balance, txs)
};

struct wallet_signals : signal_group {
    signal<int, wallet> paid{this, "/wallet/:wallet/paid"};
};

struct wallet_deps {
    wallet_signals signals;
    template <class T>
    T& get() {
        return signals;
    }
};

durable<int> collect(context& ctx, ref<wallet> w, wallet_signals& signals) {
    (void)w;
    co_return co_await ctx.wait(signals.paid);
}
inline constexpr auto collecting = define<collect>("/wallet/:wallet/collect");

// Credits a payment once: a known transaction changes nothing.
struct credit {
    std::string tx;
    int cents;
    int* runs;
    bool operator()(std::optional<wallet>& w) const {
        ++*runs;
        if (!w) w.emplace();
        if (std::ranges::find(w->txs, tx) != w->txs.end()) return false;
        w->txs.push_back(tx);
        w->balance += cents;
        return true;
    }
};
struct refuse {
    bool operator()(std::optional<wallet>&) const { throw std::runtime_error("refused"); }
};

struct emit_env {
    emit_env() {
        backing = test::documents_beside(h);
        docs.emplace(*backing);
        wallets.emplace(*docs);
        h.eng->add(collecting, deps);
    }
    ~emit_env() { h.eng.reset(); }

    // A collecting instance for `id`, waiting for its payment.
    std::string start(const std::string& id) {
        auto process = h.sync(h.eng->start(collecting, ref<wallet>(id)));
        h.settle();
        EXPECT_EQ(h.status(process.id()), instance_status::suspended);
        return process.id();
    }
    void seed(const std::string& id, int balance) {
        wallet value{balance, {}};
        ASSERT_TRUE(h.sync(wallets->put(ref<wallet>(id), value)).has_value());
    }
    std::optional<wallet> read(const std::string& id) {
        auto r = h.sync(wallets->get(ref<wallet>(id)));
        EXPECT_TRUE(r.has_value());
        return r ? *r : std::nullopt;
    }
    asio::awaitable<expected<signals::emit_result, model_error>> pay(const std::string& id,
                                                                     credit change) {
        ref<wallet> w(id);
        signals::emit_options once{.key = change.tx};
        int cents = change.cents;
        return deps.signals.paid.update_and_emit(*wallets, w, std::move(change), w, cents, once);
    }
    // The store makes the write with the fan-out (the Redis store on one server).
    bool fused() const { return dynamic_cast<test::redis_backend*>(h.backend.get()) != nullptr; }

    harness h;
    std::unique_ptr<documents> backing;
    std::optional<watched_documents> docs;
    std::optional<repository<wallet>> wallets;
    wallet_deps deps;
    int runs = 0;
};

TEST(update_and_emit, the_change_and_the_signal_are_made_together_and_a_retry_makes_neither) {
    emit_env env;
    auto& h = env.h;
    auto id = env.start("w-1");
    auto sent = h.sync(env.pay("w-1", credit{"t-1", 5, &env.runs}));
    ASSERT_TRUE(sent.has_value()) << sent.error().message;
    EXPECT_EQ(*sent, (signals::emit_result{1, false}));
    EXPECT_EQ(env.read("w-1")->balance, 5);
    // With the fan-out on Redis; elsewhere by a conditional write of its own.
    EXPECT_EQ(env.docs->put_ifs, env.fused() ? 0 : 1);
    h.settle();
    EXPECT_EQ(h.status(id), instance_status::completed);
    EXPECT_EQ(h.snapshot(id).result.value_or(nullptr), 5);

    // The retried webhook: the change finds its transaction and the emit its key.
    auto again = h.sync(env.pay("w-1", credit{"t-1", 5, &env.runs}));
    ASSERT_TRUE(again.has_value());
    EXPECT_TRUE(again->duplicate);
    EXPECT_EQ(env.read("w-1")->balance, 5);
    EXPECT_EQ(env.docs->put_ifs, env.fused() ? 0 : 1);
    EXPECT_EQ(env.runs, 2);
}

TEST(update_and_emit, a_write_between_the_read_and_the_emit_runs_the_change_again_on_it) {
    emit_env env;
    auto& h = env.h;
    auto id = env.start("w-2");
    env.seed("w-2", 100);
    env.docs->after_next_read = [](documents& inner) -> asio::awaitable<void> {
        (void)co_await inner.put("wallet", "w-2", R"({"balance":1000,"txs":[]})");
    };
    auto sent = h.sync(env.pay("w-2", credit{"t-1", 10, &env.runs}));
    ASSERT_TRUE(sent.has_value());
    EXPECT_EQ(sent->reached, 1u);
    EXPECT_EQ(env.read("w-2")->balance, 1010);  // the other writer's 1000, then the credit
    EXPECT_EQ(env.runs, 2);                     // on the stale read, then on the new one
    h.settle();
    EXPECT_EQ(h.snapshot(id).result.value_or(nullptr), 10);  // one signal, delivered once
}

TEST(update_and_emit, a_change_that_throws_writes_nothing_and_emits_nothing) {
    emit_env env;
    auto& h = env.h;
    auto id = env.start("w-3");
    env.seed("w-3", 7);
    ref<wallet> w("w-3");
    signals::emit_options once{.key = "t-1"};
    EXPECT_THROW(
        h.sync(env.deps.signals.paid.update_and_emit(*env.wallets, w, refuse{}, w, 1, once)),
        std::runtime_error);
    h.settle();
    EXPECT_EQ(env.read("w-3")->balance, 7);
    EXPECT_EQ(h.status(id), instance_status::suspended);
    EXPECT_TRUE(h.snapshot(id).inbox.empty());
}

TEST(update_and_emit, a_locked_entity_is_written_once_the_lock_is_released_then_signalled) {
    emit_env env;
    auto& h = env.h;
    auto id = env.start("w-4");
    env.seed("w-4", 1);
    auto held = h.sync(env.wallets->lock(ref<wallet>("w-4")));
    ASSERT_TRUE(held.has_value());
    std::optional<expected<signals::emit_result, model_error>> sent;
    asio::co_spawn(h.io, env.pay("w-4", credit{"t-1", 10, &env.runs}),
                   [&](std::exception_ptr e, expected<signals::emit_result, model_error> r) {
                       if (!e) sent = std::move(r);
                   });
    for (int i = 0; i < 10; ++i) h.advance(100ms);
    EXPECT_FALSE(sent);
    EXPECT_EQ(env.read("w-4")->balance, 1);     // nothing written under another holder's lock
    EXPECT_TRUE(h.snapshot(id).inbox.empty());  // and nothing delivered
    held->release();
    for (int i = 0; i < 100 && !sent; ++i) h.advance(100ms);
    ASSERT_TRUE(sent && sent->has_value());
    EXPECT_EQ((*sent)->reached, 1u);
    EXPECT_EQ(env.read("w-4")->balance, 11);
    // On Redis, after a few emits refused for the lock, by a conditional write that waited
    // for it (an emit could only have been refused again).
    EXPECT_GE(env.docs->put_ifs, 1);
    h.settle();
    EXPECT_EQ(h.snapshot(id).result.value_or(nullptr), 10);
}

// A change that changes nothing: the emit still goes out only on the entity it decided on.
struct require_balance {
    int at_least;
    int* runs;
    bool operator()(std::optional<wallet>& w) const {
        ++*runs;
        if (!w || w->balance < at_least) throw std::runtime_error("too poor");
        return false;
    }
};

TEST(update_and_emit, a_change_that_changes_nothing_emits_on_the_entity_it_decided_on) {
    emit_env env;
    auto& h = env.h;
    auto id = env.start("w-5");
    env.seed("w-5", 100);
    ref<wallet> w("w-5");
    signals::emit_options once{.key = "t-1"};
    auto sent = h.sync(env.deps.signals.paid.update_and_emit(
        *env.wallets, w, require_balance{50, &env.runs}, w, 1, once));
    ASSERT_TRUE(sent.has_value());
    EXPECT_EQ(sent->reached, 1u);
    EXPECT_EQ(env.read("w-5")->balance, 100);
    EXPECT_EQ(env.docs->put_ifs, 0);  // nothing written, on any store
    EXPECT_EQ(env.runs, 1);

    // Another writer takes the balance under the limit between the check's read and the emit:
    // where the emit checks the document (Redis, one server) it is refused and the check runs
    // again on the entity as it is now, and fails; elsewhere the check ran on the read.
    auto second = env.start("w-6");
    env.seed("w-6", 100);
    env.docs->after_next_read = [](documents& inner) -> asio::awaitable<void> {
        (void)co_await inner.put("wallet", "w-6", R"({"balance":10,"txs":[]})");
    };
    ref<wallet> w6("w-6");
    env.runs = 0;
    auto check = [&] {
        return env.deps.signals.paid.update_and_emit(*env.wallets, w6,
                                                     require_balance{50, &env.runs}, w6, 1, once);
    };
    if (env.fused()) {
        EXPECT_THROW(h.sync(check()), std::runtime_error);
        EXPECT_EQ(env.runs, 2);
        h.settle();
        EXPECT_TRUE(h.snapshot(second).inbox.empty());
        EXPECT_EQ(h.status(second), instance_status::suspended);
    } else {
        EXPECT_TRUE(h.sync(check()).has_value());
        EXPECT_EQ(env.runs, 1);
    }
    h.settle();
    EXPECT_EQ(h.snapshot(id).result.value_or(nullptr), 1);
}

TEST(update_and_start, a_created_entity_and_its_process_are_made_together_and_once) {
    emit_env env;
    auto& h = env.h;
    ref<wallet> w("w-5");
    wallet fresh{3, {}};
    auto started = h.sync(env.h.eng->create_and_start(*env.wallets, w, fresh, collecting, w));
    ASSERT_TRUE(started.has_value()) << started.error().message;
    EXPECT_TRUE(started->created);
    EXPECT_EQ(env.read("w-5")->balance, 3);
    EXPECT_EQ(env.docs->put_ifs, env.fused() ? 0 : 1);
    h.settle();
    EXPECT_EQ(h.status(started->process.id()), instance_status::suspended);

    // The retried request: both exist, nothing changes.
    wallet other{99, {}};
    auto again = h.sync(env.h.eng->create_and_start(*env.wallets, w, other, collecting, w));
    ASSERT_TRUE(again.has_value());
    EXPECT_FALSE(again->created);
    EXPECT_EQ(again->process.id(), started->process.id());
    EXPECT_EQ(env.read("w-5")->balance, 3);
    EXPECT_EQ(h.snapshot(started->process.id()).status, instance_status::suspended);
}

TEST(update_and_start, an_entity_saved_without_its_process_gets_it) {
    emit_env env;
    auto& h = env.h;
    env.seed("w-6", 7);  // a request that died after the entity, before the start
    ref<wallet> w("w-6");
    wallet fresh{1, {}};
    auto started = h.sync(env.h.eng->create_and_start(*env.wallets, w, fresh, collecting, w));
    ASSERT_TRUE(started.has_value());
    EXPECT_FALSE(started->created);
    EXPECT_EQ(env.read("w-6")->balance, 7);
    h.settle();
    EXPECT_EQ(h.status(started->process.id()), instance_status::suspended);
}

TEST(update_and_start, a_write_between_the_read_and_the_start_runs_the_change_again_on_it) {
    emit_env env;
    auto& h = env.h;
    env.seed("w-7", 100);
    env.docs->after_next_read = [](documents& inner) -> asio::awaitable<void> {
        (void)co_await inner.put("wallet", "w-7", R"({"balance":1000,"txs":[]})");
    };
    ref<wallet> w("w-7");
    credit ten{"t-1", 10, &env.runs};
    auto started = h.sync(env.h.eng->update_and_start(*env.wallets, w, ten, collecting, w));
    ASSERT_TRUE(started.has_value());
    EXPECT_EQ(env.read("w-7")->balance, 1010);
    EXPECT_EQ(env.runs, 2);
    h.settle();
    EXPECT_EQ(h.status(started->id()), instance_status::suspended);
}

TEST(update_and_start, a_change_that_throws_writes_nothing_and_starts_nothing) {
    emit_env env;
    auto& h = env.h;
    env.seed("w-8", 7);
    ref<wallet> w("w-8");
    EXPECT_THROW(h.sync(env.h.eng->update_and_start(*env.wallets, w, refuse{}, collecting, w)),
                 std::runtime_error);
    h.settle();
    EXPECT_EQ(env.read("w-8")->balance, 7);
    EXPECT_FALSE(h.sync(h.store.load(collecting.instance_id(w), false)).has_value());
}

}  // namespace
}  // namespace keel::process
