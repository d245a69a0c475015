// Consecutive entity steps (ctx.update) are committed together: an entity step whose next
// steps are entity steps too leaves its commit to theirs, since it changes nothing outside
// the entity writes that commit carries. On the Redis store with the documents on the same
// connection (on_redis.*) the writes of one entity by such steps become one write, from what
// the first read to what the last wrote; elsewhere each step wrote by
// repository<T>::update. Either way the handler sees each step's change, and a step that is
// not an entity step sees the entity committed.

#include <gtest/gtest.h>

#include <keel/framework/repository.hpp>
#include <keel/process/forwarding_store.hpp>

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

durable<int> two_deposits(context& ctx, ref<account> a, repository<account>& accounts, bank& b) {
    deposit ten{10, &b.changes};
    co_await ctx.update("ten", accounts, a, ten);
    deposit five{5, &b.changes};
    co_await ctx.update("five", accounts, a, five);
    co_await ctx.wait("/account/" + a.id() + "/go");
    co_return 0;
}
inline constexpr auto depositing_twice = define<two_deposits>("/account/:account/twice");

durable<int> deposit_then_read(context& ctx, ref<account> a, repository<account>& accounts,
                               bank& b) {
    deposit ten{10, &b.changes};
    co_await ctx.update("ten", accounts, a, ten);
    auto read = [&]() -> asio::awaitable<int> {
        auto r = co_await accounts.get(a);
        co_return r&&* r ? (*r)->balance : -1;
    };
    co_return co_await ctx.run("read", read);
}
inline constexpr auto depositing_then_reading = define<deposit_then_read>("/account/:account/read");

// The harness's store, its commits counted, under an engine of its own.
struct counted_store final : forwarding_store {
    using forwarding_store::forwarding_store;
    int commits = 0;
    asio::awaitable<expected<commit_result, store_error>> commit(commit_request req) override {
        ++commits;
        return forwarding_store::commit(std::move(req));
    }
};

struct steps_env {
    steps_env() : counted(h.store) {
        backing = test::documents_beside(h);
        docs.emplace(*backing);
        accounts.emplace(*docs);
        b.accounts = &*accounts;
        eng.emplace(h.io.get_executor(), counted, h.clock,
                    engine_options{.worker = "w2", .seed = 7});
        eng->add(depositing_twice, b);
        eng->add(depositing_then_reading, b);
        eng->run();
        h.settle();
    }
    ~steps_env() {
        eng.reset();
        h.settle();
    }

    int balance(const std::string& id) {
        auto r = h.sync(accounts->get(ref<account>(id)));
        return r && *r ? (*r)->balance : -1;
    }
    std::vector<std::string> journal_names(const std::string& id) {
        std::vector<std::string> names;
        for (const auto& e : h.snapshot(id).journal) names.push_back(e.name);
        return names;
    }
    // The store makes the writes with the commits (the Redis store on one server).
    bool fused() const { return dynamic_cast<test::redis_backend*>(h.backend.get()) != nullptr; }

    harness h;
    counted_store counted;
    std::unique_ptr<documents> backing;
    std::optional<watched_documents> docs;
    std::optional<repository<account>> accounts;
    bank b;
    std::optional<engine> eng;
};

TEST(entity_steps, two_in_a_row_are_committed_together) {
    steps_env env;
    auto& h = env.h;
    auto process = h.sync(env.eng->start(depositing_twice, ref<account>("a-1")));
    h.settle();
    EXPECT_EQ(h.status(process.id()), instance_status::suspended);
    EXPECT_EQ(env.counted.commits, 1);  // both steps with the suspension
    EXPECT_EQ(env.journal_names(process.id()), (std::vector<std::string>{"ten", "five"}));
    EXPECT_EQ(env.balance("a-1"), 15);
    EXPECT_EQ(env.b.changes, 2);
    EXPECT_EQ(env.docs->put_ifs, env.fused() ? 0 : 2);
}

TEST(entity_steps, one_before_another_kind_of_step_is_committed_before_that_step_runs) {
    steps_env env;
    auto& h = env.h;
    auto process = h.sync(env.eng->start(depositing_then_reading, ref<account>("a-2")));
    h.settle();
    ASSERT_EQ(h.status(process.id()), instance_status::completed);
    EXPECT_EQ(h.snapshot(process.id()).result.value_or(nullptr), 10);  // the read sees it
    EXPECT_EQ(env.counted.commits, 2);  // the entity step, then the final one with the read
}

TEST(entity_steps, one_that_read_the_entity_elsewhere_is_not_committed_with_the_one_before) {
    steps_env env;
    auto& h = env.h;
    // The second step reads the stored document, not what the first one wrote (as when this
    // process no longer remembers it): the two writes do not chain, and are not made as one.
    env.docs->stored_read_at = 2;
    auto process = h.sync(env.eng->start(depositing_twice, ref<account>("a-3")));
    for (int i = 0; i < 100 && h.status(process.id()) != instance_status::suspended; ++i)
        h.advance(10ms);
    ASSERT_EQ(h.status(process.id()), instance_status::suspended);
    EXPECT_EQ(env.journal_names(process.id()), (std::vector<std::string>{"ten", "five"}));
    EXPECT_EQ(env.balance("a-3"), 15);  // each change once: none written over another
    // Where the writes travel with the commit, the steps ran again once, each committed on
    // its own; elsewhere each wrote by itself and nothing had to run again.
    EXPECT_EQ(env.b.changes, env.fused() ? 4 : 2);
}

}  // namespace
}  // namespace keel::process
