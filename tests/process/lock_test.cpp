// ctx.lock and held<T>: entity locks held by process handlers across suspensions. The lock is
// released before every suspension and taken again, with the entity read again, when the
// handler resumes live ("rehydration"); replayed code takes no lock. The processes run on the
// harness's store (in memory, or Redis for on_redis.*); the entities always live in a real
// redis-server of their own.

#include <gtest/gtest.h>

#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <functional>
#include <keel/framework/repository.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

struct order {
    static constexpr std::string_view model_name = "order";
    std::string status;
    int counter = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(order, status, counter)
};

// What the handlers may do to the test's Redis (a dependency).
struct hooks {
    keel::test::redis_server* server = nullptr;
    void drop_lock(const std::string& id) const {
        server->cli({"DEL", "keel:{order:" + id + "}:lock"});
    }
};

// Whether the entity's lock is free: taking it with a short wait succeeds (and is undone).
asio::awaitable<bool> lock_is_free(repository<order>& orders, ref<order> o) {
    std::optional<std::chrono::milliseconds> wait = 30ms;
    auto got = co_await orders.lock(o, wait);
    bool free = got.has_value();
    if (got) got->release();
    co_return free;
}

// Takes the lock as another holder would (co_spawn needs a default-constructible result).
asio::awaitable<std::optional<keel::locked<order>>> take(repository<order>& orders, ref<order> o,
                                                         std::chrono::milliseconds wait) {
    std::optional<std::chrono::milliseconds> w = wait;
    auto got = co_await orders.lock(o, w);
    std::optional<keel::locked<order>> out;
    if (got) out.emplace(std::move(*got));
    co_return out;
}

// Locks the order, then reads it after each of two signals; saves at the end.
durable<std::string> follow(context& ctx, ref<order> o, repository<order>& orders) {
    auto entity = co_await ctx.lock(orders, o);
    std::string seen = entity->status;
    for (int i = 0; i < 2; ++i) {
        co_await ctx.wait("/order/" + o.id() + "/go");
        seen += "|" + entity->status;
    }
    entity->counter += 100;
    bool saved = co_await ctx.run("save", [&]() -> asio::awaitable<bool> {
        auto r = co_await entity.save();
        co_return r.has_value();
    });
    co_return seen + (saved ? "|saved" : "|not saved");
}
inline constexpr auto following = define<follow>("/order/:order/follow");

// Locks the order and waits once; reports whether the lock came back after the resume.
durable<std::string> careful(context& ctx, ref<order> o, repository<order>& orders) {
    auto entity = co_await ctx.lock(orders, o);
    co_await ctx.wait("/order/" + o.id() + "/go");
    if (!entity.lost()) co_return "held:" + entity->status;
    std::string error;
    try {
        (void)entity.value();
    } catch (const lock_lost& e) {
        error = e.what();
    }
    auto saved = co_await ctx.run("save", [&]() -> asio::awaitable<std::string> {
        auto r = co_await entity.save();
        if (r) co_return std::string("saved");
        co_return std::string(r.error().kind == model_error::code::lock_lost ? "lock_lost"
                                                                             : "other error");
    });
    co_return "lost|" + saved + "|" + (error.empty() ? "value given" : "value throws");
}
inline constexpr auto carefully = define<careful>("/order/:order/careful");

// The lock is held while the handler holds the held<T> and no longer once it let it go;
// a second entity stays locked until the handler completes.
durable<std::string> scoped(context& ctx, ref<order> o, repository<order>& orders) {
    ref<order> other(o.id() + "-b");
    auto kept = co_await ctx.lock(orders, other);
    std::string out;
    {
        auto entity = co_await ctx.lock(orders, o);
        bool inside = co_await ctx.run("probe inside", [&] { return lock_is_free(orders, o); });
        out += inside ? "free" : "held";
    }
    bool after = co_await ctx.run("probe after", [&] { return lock_is_free(orders, o); });
    out += after ? "|free" : "|held";
    bool other_inside =
        co_await ctx.run("probe other", [&] { return lock_is_free(orders, other); });
    out += other_inside ? "|free" : "|held";
    co_return out;
}
inline constexpr auto scoping = define<scoped>("/order/:order/scoped");

// Saves after the lease was taken away behind the handler's back.
durable<std::string> stolen(context& ctx, ref<order> o, repository<order>& orders, hooks& hk) {
    auto entity = co_await ctx.lock(orders, o);
    entity->status = "mine";
    co_return co_await ctx.run("save", [&]() -> asio::awaitable<std::string> {
        std::string out = entity.locked() ? "locked" : "not locked";
        hk.drop_lock(o.id());
        auto r = co_await entity.save();
        if (r)
            out += "|saved";
        else
            out += r.error().kind == model_error::code::lock_lost ? "|lock_lost" : "|other error";
        out += entity.locked() ? "|locked" : "|not locked";
        co_return out;
    });
}
inline constexpr auto stealing = define<stolen>("/order/:order/stolen");

// A lock that cannot be taken fails like a run step.
durable<std::string> impatient(context& ctx, ref<order> o, repository<order>& orders) {
    try {
        auto entity = co_await ctx.lock(orders, o);
        co_return "locked";
    } catch (const step_failed& e) {
        co_return std::string(e.what());
    }
}
inline constexpr auto impatiently = define<impatient>("/order/:order/impatient");

// An engine (harness) and a repository of orders on a redis-server of its own.
struct lock_env {
    explicit lock_env(engine_options options, std::chrono::milliseconds lock_wait = 3s)
        : h(std::move(options)),
          redis(redis::connection::create(h.io.get_executor(),
                                          {.url = server.url(), .health_check_interval = {}})
                    .value()),
          orders(redis, {.lock_ttl = 10s, .lock_wait = lock_wait}) {
        hk.server = &server;
        h.eng->add(following, *this);
        h.eng->add(carefully, *this);
        h.eng->add(scoping, *this);
        h.eng->add(stealing, *this);
        h.eng->add(impatiently, *this);
    }
    ~lock_env() {
        h.eng.reset();  // frees the handlers (and their held<T>) before the repository goes
        pump(20ms);
    }

    template <class T>
    T& get() {
        if constexpr (std::is_same_v<T, hooks>)
            return hk;
        else
            return orders;
    }

    template <class T>
    T await(asio::awaitable<T> task) {
        return keel::test::run(h.io, std::move(task), 10s);
    }
    // Runs the io_context until `done` (handlers wait for a real Redis: settle() alone does
    // not wait for replies on another connection).
    bool until(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
        auto deadline = std::chrono::steady_clock::now() + limit;
        for (;;) {
            h.settle();
            if (done()) return true;
            if (std::chrono::steady_clock::now() > deadline) return false;
            h.io.restart();
            h.io.run_one_for(5ms);
        }
    }
    void pump(std::chrono::milliseconds d) {
        auto deadline = std::chrono::steady_clock::now() + d;
        while (std::chrono::steady_clock::now() < deadline) {
            h.io.restart();
            h.io.run_one_for(5ms);
        }
        h.settle();
    }
    void put(const std::string& id, std::string status, int counter) {
        order value{std::move(status), counter};
        ASSERT_TRUE(await(orders.put(ref<order>(id), value)).has_value());
    }
    bool free(const std::string& id) { return await(lock_is_free(orders, ref<order>(id))); }
    std::size_t journal_length(const std::string& id) { return h.snapshot(id).journal.size(); }
    // How many times the entity's lock was ever taken (its fencing counter).
    std::string acquisitions(const std::string& id) {
        return server.cli({"GET", "keel:{order:" + id + "}:fence"});
    }
    void deliver(const std::string& id, const std::string& path) {
        h.sync(h.eng->deliver(id, path, nlohmann::json(), ""));
    }

    harness h;
    keel::test::redis_server server;
    redis::connection redis;
    repository<order> orders;
    hooks hk;
};

// Hot: the instance stays in memory between resumes; evicted (max_hot = 0): every resume
// replays the journal.
class locks : public ::testing::TestWithParam<std::size_t> {};
INSTANTIATE_TEST_SUITE_P(cache, locks, ::testing::Values(10'000, 0),
                         [](const auto& info) { return info.param ? "hot" : "evicted"; });

TEST_P(locks, a_resumed_handler_sees_the_entity_as_changed_while_it_was_suspended) {
    lock_env env({.max_hot = GetParam()});
    env.put("o-1", "created", 1);
    auto handle = env.h.sync(env.h.eng->start(following, ref<order>("o-1")));
    const auto id = handle.id();
    ASSERT_TRUE(env.until([&] { return env.h.status(id) == instance_status::suspended; }));
    EXPECT_TRUE(env.free("o-1")) << "the lock is held while the instance is suspended";

    env.put("o-1", "paid", 2);
    env.deliver(id, "/order/o-1/go");
    ASSERT_TRUE(env.until([&] {
        return env.journal_length(id) == 3 && env.h.status(id) == instance_status::suspended;
    }));
    EXPECT_TRUE(env.free("o-1")) << "the lock is held while the instance is suspended";

    env.put("o-1", "shipped", 3);
    env.deliver(id, "/order/o-1/go");
    ASSERT_TRUE(env.until([&] { return env.h.status(id) == instance_status::completed; }));
    auto r = env.h.sync(handle.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "created|paid|shipped|saved");

    // The save went through the lease taken again at the last resume, over the new state.
    auto stored = env.await(env.orders.get(ref<order>("o-1")));
    ASSERT_TRUE(stored.has_value() && stored->has_value());
    EXPECT_EQ((*stored)->status, "shipped");
    EXPECT_EQ((*stored)->counter, 103);
    EXPECT_TRUE(env.free("o-1")) << "the lock is released when the handler completes";

    // lock, then per resume a relock (the entity read again) before the signal.
    auto journal = env.h.snapshot(id).journal;
    ASSERT_EQ(journal.size(), 6u);
    EXPECT_EQ(journal[0].kind, op_kind::lock);
    EXPECT_EQ(journal[0].name, "order/o-1");
    EXPECT_EQ(journal[0].value, (nlohmann::json{{"status", "created"}, {"counter", 1}}));
    EXPECT_EQ(journal[1].kind, op_kind::relock);
    EXPECT_EQ(journal[1].seq, journal[0].seq);
    EXPECT_EQ(journal[1].name, "order/o-1");
    EXPECT_EQ(journal[1].value, (nlohmann::json{{"status", "paid"}, {"counter", 2}}));
    EXPECT_FALSE(journal[1].failed);
    EXPECT_EQ(journal[2].kind, op_kind::signal);
    EXPECT_EQ(journal[3].kind, op_kind::relock);
    EXPECT_EQ(journal[3].value, (nlohmann::json{{"status", "shipped"}, {"counter", 3}}));
    EXPECT_EQ(journal[4].kind, op_kind::signal);
    EXPECT_EQ(journal[5].kind, op_kind::run);
    EXPECT_EQ(journal[5].value, true);

    // Taken: by the lock operation, by each probe, by each relock. Never by a replay (when
    // evicted, the second resume replayed the lock and the first relock).
    EXPECT_EQ(env.acquisitions("o-1"), "6");
}

TEST_P(locks, replay_takes_no_lock_and_the_relock_waits_for_another_holder) {
    lock_env env({.max_hot = GetParam()});
    env.put("o-1", "created", 1);
    auto handle = env.h.sync(env.h.eng->start(following, ref<order>("o-1")));
    const auto id = handle.id();
    ASSERT_TRUE(env.until([&] { return env.h.status(id) == instance_status::suspended; }));

    auto holder = env.await(take(env.orders, ref<order>("o-1"), 1s));
    ASSERT_TRUE(holder.has_value());
    env.deliver(id, "/order/o-1/go");
    env.pump(300ms);
    // The handler was resumed (evicted: replayed up to its wait) but waits for the lock:
    // nothing recorded yet, and nobody but the test took the lock since.
    EXPECT_EQ(env.journal_length(id), 1u);
    EXPECT_EQ(env.acquisitions("o-1"), "2");

    (*holder)->status = "by holder";
    ASSERT_TRUE(env.await(holder->save()).has_value());
    holder->release();
    ASSERT_TRUE(env.until([&] {
        return env.journal_length(id) == 3 && env.h.status(id) == instance_status::suspended;
    }));
    env.deliver(id, "/order/o-1/go");
    ASSERT_TRUE(env.until([&] { return env.h.status(id) == instance_status::completed; }));
    auto r = env.h.sync(handle.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "created|by holder|by holder|saved");
    EXPECT_EQ(env.acquisitions("o-1"), "4");  // lock, holder, two relocks
}

TEST_P(locks, a_lock_not_taken_again_at_the_resume_is_recorded_and_reported) {
    lock_env env({.max_hot = GetParam()}, 200ms);
    env.put("o-1", "created", 1);
    auto handle = env.h.sync(env.h.eng->start(carefully, ref<order>("o-1")));
    const auto id = handle.id();
    ASSERT_TRUE(env.until([&] { return env.h.status(id) == instance_status::suspended; }));

    auto holder = env.await(take(env.orders, ref<order>("o-1"), 1s));
    ASSERT_TRUE(holder.has_value());
    env.deliver(id, "/order/o-1/go");
    ASSERT_TRUE(env.until([&] { return env.h.status(id) == instance_status::completed; }));
    auto r = env.h.sync(handle.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "lost|lock_lost|value throws");

    auto journal = env.h.snapshot(id).journal;
    ASSERT_EQ(journal.size(), 4u);
    EXPECT_EQ(journal[1].kind, op_kind::relock);
    EXPECT_TRUE(journal[1].failed);
    EXPECT_NE(journal[1].value["message"].get<std::string>().find("locked by another holder"),
              std::string::npos);
    EXPECT_EQ(journal[2].kind, op_kind::signal);
    // The holder's lease was never disturbed.
    EXPECT_FALSE(holder->lost());
    EXPECT_TRUE(env.await(holder->save()).has_value());
}

TEST_P(locks, the_lock_is_held_until_the_handler_lets_it_go_or_completes) {
    lock_env env({.max_hot = GetParam()});
    auto handle = env.h.sync(env.h.eng->start(scoping, ref<order>("o-1")));
    ASSERT_TRUE(env.until([&] { return env.h.status(handle.id()) == instance_status::completed; }));
    auto r = env.h.sync(handle.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "held|free|held");
    EXPECT_TRUE(env.free("o-1-b"));
    // An entity that does not exist is locked all the same, and recorded as null.
    auto journal = env.h.snapshot(handle.id()).journal;
    ASSERT_GE(journal.size(), 2u);
    EXPECT_EQ(journal[0].kind, op_kind::lock);
    EXPECT_EQ(journal[0].name, "order/o-1-b");
    EXPECT_TRUE(journal[0].value.is_null());
}

TEST_P(locks, a_lock_not_obtained_is_recorded_and_thrown_as_a_failed_step) {
    lock_env env({.max_hot = GetParam()}, 100ms);
    auto holder = env.await(take(env.orders, ref<order>("o-1"), 1s));
    ASSERT_TRUE(holder.has_value());
    auto handle = env.h.sync(env.h.eng->start(impatiently, ref<order>("o-1")));
    ASSERT_TRUE(env.until([&] { return env.h.status(handle.id()) == instance_status::completed; }));
    auto r = env.h.sync(handle.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r,
              "step \"lock order/o-1\" failed: order o-1 is locked by another holder; gave up "
              "after 100 ms");
    auto journal = env.h.snapshot(handle.id()).journal;
    ASSERT_EQ(journal.size(), 1u);
    EXPECT_EQ(journal[0].kind, op_kind::lock);
    EXPECT_TRUE(journal[0].failed);
    EXPECT_EQ(env.acquisitions("o-1"), "1");  // only the holder's
}

TEST_P(locks, saving_after_the_lease_was_lost_fails_with_lock_lost) {
    lock_env env({.max_hot = GetParam()});
    env.put("o-1", "created", 1);
    auto handle = env.h.sync(env.h.eng->start(stealing, ref<order>("o-1")));
    ASSERT_TRUE(env.until([&] { return env.h.status(handle.id()) == instance_status::completed; }));
    auto r = env.h.sync(handle.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "locked|lock_lost|not locked");
    auto stored = env.await(env.orders.get(ref<order>("o-1")));
    ASSERT_TRUE(stored.has_value() && stored->has_value());
    EXPECT_EQ((*stored)->status, "created");
}

// The same process as `following` after a code change: it lets the lock go before waiting.
durable<std::string> forgetful(context& ctx, ref<order> o, repository<order>& orders) {
    { auto entity = co_await ctx.lock(orders, o); }
    co_await ctx.wait("/order/" + o.id() + "/go");
    co_await ctx.wait("/order/" + o.id() + "/go");
    co_return "forgot";
}
inline constexpr auto forgetting = define<forgetful>("/order/:order/follow");

TEST(locks_replay, a_relock_of_a_lock_the_handler_no_longer_holds_parks_the_instance) {
    lock_env env({.max_hot = 0});
    env.put("o-1", "created", 1);
    auto handle = env.h.sync(env.h.eng->start(following, ref<order>("o-1")));
    const auto id = handle.id();
    ASSERT_TRUE(env.until([&] { return env.h.status(id) == instance_status::suspended; }));
    env.deliver(id, "/order/o-1/go");
    ASSERT_TRUE(env.until([&] {
        return env.journal_length(id) == 3 && env.h.status(id) == instance_status::suspended;
    }));

    env.h.eng.reset();
    env.h.eng.emplace(env.h.io.get_executor(), env.h.store, env.h.clock,
                      engine_options{.worker = "w2", .max_hot = 0, .seed = 7});
    env.h.eng->add(forgetting, env);
    env.h.eng->run();
    env.deliver(id, "/order/o-1/go");
    ASSERT_TRUE(env.until([&] { return env.h.status(id) == instance_status::failed; }));
    auto snap = env.h.snapshot(id);
    EXPECT_TRUE(snap.parked);
    ASSERT_TRUE(snap.error.has_value());
    EXPECT_NE(snap.error->find("the journal has relock \"order/o-1\" (operation #0) but the "
                               "handler holds no such lock"),
              std::string::npos)
        << *snap.error;
    EXPECT_EQ(snap.journal.size(), 3u);
}

}  // namespace
}  // namespace keel::process
