// ctx.update: a step that changes one entity. On the Redis store with the documents on the
// same connection (on_redis.*) the write travels with the step's commit; on the in-memory
// store and on a cluster the step writes with repository<T>::update first. Either way a
// handler sees the same: the change applied once to the entity as it is, also when another
// writer changed it between the step's read and its write.

#include <gtest/gtest.h>

#include <keel/framework/repository.hpp>

#include "accounts.hpp"
#include "harness.hpp"
#include "watched_documents.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::account;
using test::bank;
using test::deposit;
using test::harness;
using test::watched_documents;

struct leave_as_is {
    bool operator()(std::optional<account>&) const { return false; }
};

durable<std::string> deposit_twice(context& ctx, ref<account> a, repository<account>& accounts,
                                   bank& b) {
    deposit ten{10, &b.changes};
    bool first = co_await ctx.update("deposit", accounts, a, ten);
    leave_as_is nothing;
    bool second = co_await ctx.update("look", accounts, a, nothing);
    co_await ctx.wait("/account/" + a.id() + "/go");
    deposit five{5, &b.changes};
    bool third = co_await ctx.update("deposit again", accounts, a, five);
    co_return std::to_string(first) + std::to_string(second) + std::to_string(third);
}
inline constexpr auto depositing = define<deposit_twice>("/account/:account/deposit");

// The harness with accounts on documents the store can write when it is on Redis (the same
// connection), in memory otherwise.
struct update_env {
    update_env() {
        backing = test::documents_beside(h);
        docs.emplace(*backing);
        accounts.emplace(*docs);
        b.accounts = &*accounts;
        h.eng->add(depositing, b);
    }
    ~update_env() { h.eng.reset(); }

    std::optional<account> read(const std::string& id) {
        auto r = h.sync(accounts->get(ref<account>(id)));
        EXPECT_TRUE(r.has_value());
        return r ? *r : std::nullopt;
    }
    void seed(const std::string& id, int balance) {
        account value{balance};
        ASSERT_TRUE(h.sync(accounts->put(ref<account>(id), value)).has_value());
    }
    // Advances time by 100 ms steps until the instance has journaled `entries`, or `limit`
    // passed.
    void advance_until_journaled(const std::string& id, std::size_t entries, duration limit) {
        for (duration spent{}; spent < limit && h.snapshot(id).journal.size() < entries;
             spent += 100ms)
            h.advance(100ms);
    }
    // The store makes the write with the commit (the Redis store on one server).
    bool fused() const { return dynamic_cast<test::redis_backend*>(h.backend.get()) != nullptr; }
    void settle_until_final(const std::string& id) {
        for (int i = 0; i < 100 && !is_final(h.status(id)); ++i) h.advance(100ms);
    }

    harness h;
    std::unique_ptr<documents> backing;
    std::optional<watched_documents> docs;
    std::optional<repository<account>> accounts;
    bank b;
};

TEST(update, a_step_changes_the_entity_once_and_replays_without_changing_it_again) {
    update_env env;
    auto& h = env.h;
    std::string id = "account/a-1/deposit";
    h.sync(h.eng->start(depositing, ref<account>("a-1")));
    h.settle();
    EXPECT_EQ(env.read("a-1")->balance, 10);
    EXPECT_EQ(env.b.changes, 1);
    // With the commit on Redis; elsewhere by a conditional write of its own.
    EXPECT_EQ(env.docs->put_ifs, env.fused() ? 0 : 1);
    auto journal = h.snapshot(id).journal;
    ASSERT_GE(journal.size(), 2u);
    EXPECT_EQ(journal[0].name, "deposit");
    EXPECT_EQ(journal[0].kind, op_kind::run);
    EXPECT_EQ(journal[0].value, true);
    EXPECT_EQ(journal[1].name, "look");
    EXPECT_EQ(journal[1].value, false);

    h.sync(h.eng->deliver(id, "/account/a-1/go", nlohmann::json(), ""));
    env.settle_until_final(id);
    ASSERT_EQ(h.status(id), instance_status::completed);
    EXPECT_EQ(h.snapshot(id).result.value_or(nullptr), "101");
    EXPECT_EQ(env.read("a-1")->balance, 15);
    EXPECT_EQ(env.b.changes, 2);
}

TEST(update, a_write_between_the_read_and_the_commit_runs_the_change_again_on_it) {
    update_env env;
    auto& h = env.h;
    std::string id = "account/a-2/deposit";
    env.seed("a-2", 100);
    env.docs->after_next_read = [](documents& inner) -> asio::awaitable<void> {
        (void)co_await inner.put("account", "a-2", R"({"balance":1000})");
    };
    h.sync(h.eng->start(depositing, ref<account>("a-2")));
    env.advance_until_journaled(id, 2, 2s);
    EXPECT_EQ(env.read("a-2")->balance, 1010);  // the other writer's 1000, then the deposit
    EXPECT_EQ(env.b.changes, 2);                // on the stale read, then on the new one
    EXPECT_EQ(h.snapshot(id).journal.at(0).value, true);
}

TEST(update, an_entity_locked_by_another_holder_is_written_once_the_lock_is_released) {
    update_env env;
    auto& h = env.h;
    std::string id = "account/a-3/deposit";
    env.seed("a-3", 1);
    auto held = h.sync(env.accounts->lock(ref<account>("a-3")));
    ASSERT_TRUE(held.has_value());
    h.sync(h.eng->start(depositing, ref<account>("a-3")));
    for (int i = 0; i < 20; ++i) h.advance(100ms);
    EXPECT_EQ(env.read("a-3")->balance, 1);  // nothing written under another holder's lock
    EXPECT_TRUE(h.snapshot(id).journal.empty());
    held->release();
    env.advance_until_journaled(id, 2, 10s);
    EXPECT_EQ(env.read("a-3")->balance, 11);
    EXPECT_EQ(h.snapshot(id).journal.at(0).value, true);
    // On Redis, after a few commits refused for the lock, by a conditional write that waited
    // for it (a commit could only have been refused again).
    EXPECT_GE(env.docs->put_ifs, 1);
}

}  // namespace
}  // namespace keel::process
