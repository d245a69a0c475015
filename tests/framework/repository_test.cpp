// repository<T> and locked<T> on both keel::documents: against a real redis-server
// (redis_documents) and in memory (memory_documents, on the system clock here; the tests at
// the end use a manual clock). What is specific to Redis (lease TTLs and renewal) is tested
// on Redis only.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/framework/memory_documents.hpp>
#include <keel/framework/repository.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

struct order {
    static constexpr std::string_view model_name = "order";
    std::string status;
    int counter = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(order, status, counter)
};

asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

// The same cases on each keel::documents: "redis" or "memory".
class documents_test : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        if (GetParam() == "redis") {
            server.emplace();
            redis.emplace(
                keel::redis::connection::create(io.get_executor(), {.url = server->url()}).value());
        }
    }
    keel::documents& documents(std::chrono::milliseconds lock_wait = 5s) {
        if (redis)
            docs = std::make_unique<keel::redis_documents>(
                *redis, keel::repository_options{.lock_wait = lock_wait});
        else
            docs = std::make_unique<keel::memory_documents>(clock, lock_wait);
        return *docs;
    }
    // Takes the lease from its holder, as when it expires during the holder's pause.
    void expire_lock(std::string_view model, std::string_view id) {
        if (server)
            server->cli({"DEL", "keel:{" + std::string(model) + ":" + std::string(id) + "}:lock"});
        else
            ASSERT_TRUE(static_cast<keel::memory_documents&>(*docs).expire(model, id));
    }

    asio::io_context io;
    keel::system_clock clock;
    std::optional<keel::test::redis_server> server;
    std::optional<keel::redis::connection> redis;
    std::unique_ptr<keel::documents> docs;
};

INSTANTIATE_TEST_SUITE_P(on, documents_test, ::testing::Values("redis", "memory"),
                         [](const auto& info) { return info.param; });

TEST_P(documents_test, get_put_remove) {
    keel::repository<order> orders(documents());
    keel::ref<order> o1("o-1");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto absent = co_await orders.get(o1);
        CO_ASSERT_TRUE(absent.has_value());
        EXPECT_FALSE(absent->has_value());
        const order created{"created", 1};
        auto put = co_await orders.put(o1, created);
        EXPECT_TRUE(put);
        auto got = co_await orders.get(o1);
        EXPECT_EQ((*got)->status, "created");
        auto removed = co_await orders.remove(o1);
        EXPECT_TRUE(removed.has_value() && *removed);
        auto again = co_await orders.remove(o1);
        EXPECT_TRUE(again.has_value() && !*again);
        auto gone = co_await orders.get(o1);
        EXPECT_TRUE(gone.has_value() && !gone->has_value());
    }());
    if (server) EXPECT_EQ(server->cli({"EXISTS", "keel:{order:o-1}:doc"}), "0");
}

TEST_P(documents_test, a_document_that_does_not_decode_is_an_error_not_a_crash) {
    auto& docs = documents();
    keel::repository<order> orders(docs);
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto raw = co_await docs.put("order", "bad", "{\"status\": 42}");
        CO_ASSERT_TRUE(raw.has_value());
        auto r = co_await orders.get(keel::ref<order>("bad"));
        CO_ASSERT_TRUE(!r);
        EXPECT_EQ(r.error().kind, keel::model_error::code::invalid_document);
        EXPECT_NE(r.error().message.find("order bad"), std::string::npos) << r.error().message;
        auto l = co_await orders.lock(keel::ref<order>("bad"));
        CO_ASSERT_TRUE(!l);
        EXPECT_EQ(l.error().kind, keel::model_error::code::invalid_document);
        // The lease taken to read it was given back: locking again is not a timeout.
        auto again = co_await orders.lock(keel::ref<order>("bad"), 1s);
        CO_ASSERT_TRUE(!again);
        EXPECT_EQ(again.error().kind, keel::model_error::code::invalid_document);
    }());
}

TEST_P(documents_test, two_holders_never_overlap) {
    keel::repository<order> orders(documents(10s));
    keel::ref<order> o("shared");
    int inside = 0, max_inside = 0;
    std::vector<std::uint64_t> tokens;
    constexpr int holders = 20;
    keel::test::run_concurrently(io, holders, [&](int) {
        return [&]() -> asio::awaitable<void> {
            auto l = co_await orders.lock(o);
            CO_ASSERT_TRUE(l.has_value());
            max_inside = std::max(max_inside, ++inside);
            tokens.push_back(l->token());
            if (!l->value()) l->value() = order{"new", 0};
            auto seen = (*l)->counter;
            co_await pause(2ms);  // read-modify-write across a suspension
            (*l)->counter = seen + 1;
            auto saved = co_await l->save();
            EXPECT_TRUE(saved);
            --inside;
            l->release();
        };
    });
    EXPECT_EQ(max_inside, 1);
    EXPECT_TRUE(std::is_sorted(tokens.begin(), tokens.end()));  // fencing tokens only grow
    auto final_state = keel::test::run(io, orders.get(o));
    EXPECT_EQ((*final_state)->counter, holders);
}

TEST_P(documents_test, a_stale_holder_cannot_write) {
    keel::repository<order> orders(documents(1s));
    keel::ref<order> o("o-2");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        const order created{"created", 0};
        co_await orders.put(o, created);
        auto first = co_await orders.lock(o);
        CO_ASSERT_TRUE(first.has_value());
        expire_lock("order", "o-2");
        auto second = co_await orders.lock(o);
        CO_ASSERT_TRUE(second.has_value());
        EXPECT_GT(second->token(), first->token());
        (*second)->status = "paid";
        auto saved = co_await second->save();
        EXPECT_TRUE(saved);
        (*first)->status = "expired";
        auto stale = co_await first->save();
        CO_ASSERT_TRUE(!stale);
        EXPECT_EQ(stale.error().kind, keel::model_error::code::lock_lost);
        EXPECT_TRUE(first->lost());
        auto now = co_await orders.get(o);
        EXPECT_EQ((*now)->status, "paid");  // the stale write did not land
        // The stale holder letting go does not free the newer holder's lease.
        first->release();
        auto busy = co_await orders.lock(o, 20ms);
        CO_ASSERT_TRUE(!busy);
        EXPECT_EQ(busy.error().kind, keel::model_error::code::lock_timeout);
        EXPECT_NE(busy.error().message.find("order o-2"), std::string::npos)
            << busy.error().message;
    }());
}

TEST_P(documents_test, a_released_lock_goes_to_the_next_waiter_and_a_released_lease_cannot_save) {
    keel::repository<order> orders(documents(10s));
    keel::ref<order> o("o-5");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto first = co_await orders.lock(o);
        CO_ASSERT_TRUE(first.has_value());
        first->value() = order{"created", 1};
        CO_ASSERT_TRUE((co_await first->save()).has_value());
        first->release();
        EXPECT_FALSE(first->lost());
        auto late = co_await first->save();
        CO_ASSERT_TRUE(!late);
        EXPECT_EQ(late.error().kind, keel::model_error::code::lock_lost);
        auto second = co_await orders.lock(o, 1s);
        CO_ASSERT_TRUE(second.has_value());
        EXPECT_EQ((*second)->counter, 1);
    }());
}

TEST_P(documents_test, save_and_release_writes_and_frees_the_lock_in_one_step) {
    keel::repository<order> orders(documents(10s));
    keel::ref<order> o("o-6");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto first = co_await orders.lock(o);
        CO_ASSERT_TRUE(first.has_value());
        first->value() = order{"paid", 1};
        CO_ASSERT_TRUE((co_await first->save_and_release()).has_value());
        auto late = co_await first->save();  // the lease is gone
        CO_ASSERT_TRUE(!late);
        EXPECT_EQ(late.error().kind, keel::model_error::code::lock_lost);
        auto second = co_await orders.lock(o, 20ms);  // free at once, no timeout
        CO_ASSERT_TRUE(second.has_value());
        EXPECT_EQ((*second)->status, "paid");
        // A stale holder's save_and_release neither writes nor frees the newer holder's lock.
        expire_lock("order", "o-6");
        auto third = co_await orders.lock(o);
        CO_ASSERT_TRUE(third.has_value());
        (*second)->status = "stale";
        auto stale = co_await second->save_and_release();
        CO_ASSERT_TRUE(!stale);
        EXPECT_EQ(stale.error().kind, keel::model_error::code::lock_lost);
        auto busy = co_await orders.lock(o, 20ms);
        CO_ASSERT_TRUE(!busy);
        EXPECT_EQ((*(co_await orders.get(o)))->status, "paid");
    }());
}

// Redis only: lease TTLs and renewal.
class repository_test : public ::testing::Test {
  protected:
    keel::redis::connection connect() {
        return keel::redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    }
    asio::io_context io;
    keel::test::redis_server server;
};

TEST_F(repository_test, a_crashed_holders_lock_expires) {
    keel::ref<order> o("o-3");
    {
        // A holder on its own io_context that stops running after taking the lock: it never
        // renews and never releases, as when its process dies.
        asio::io_context crashed;
        auto redis =
            keel::redis::connection::create(crashed.get_executor(), {.url = server.url()}).value();
        keel::repository<order> orders(redis, {.lock_ttl = 300ms});
        std::optional<keel::locked<order>> held;
        keel::test::run(crashed, [&]() -> asio::awaitable<void> {
            auto l = co_await orders.lock(o);
            CO_ASSERT_TRUE(l.has_value());
            held.emplace(std::move(*l));
        }());
        ASSERT_TRUE(held);
    }
    auto redis = connect();
    keel::repository<order> orders(redis);
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto busy = co_await orders.lock(o, 50ms);
        CO_ASSERT_TRUE(!busy);
        EXPECT_EQ(busy.error().kind, keel::model_error::code::lock_timeout);
        EXPECT_NE(busy.error().message.find("order o-3"), std::string::npos)
            << busy.error().message;
        auto later = co_await orders.lock(o, 2s);
        EXPECT_TRUE(later.has_value());
    }());
}

// One script for both, where save() then release() are two.
TEST_F(repository_test, save_and_release_is_one_round_trip) {
    auto redis = connect();
    keel::repository<order> orders(redis);
    keel::ref<order> o("o-7");
    auto scripts_run = [&] {
        auto stats = server.cli({"INFO", "commandstats"});
        auto at = stats.find("cmdstat_evalsha:calls=");
        return at == std::string::npos ? 0 : std::stoi(stats.substr(at + 22));
    };
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto held = co_await orders.lock(o);
        CO_ASSERT_TRUE(held.has_value());
        held->value() = order{"paid", 1};
        int before = scripts_run();
        CO_ASSERT_TRUE((co_await held->save_and_release()).has_value());
        co_await pause(20ms);  // a release sent on its own would have arrived by now
        EXPECT_EQ(scripts_run() - before, 1);
    }());
}

// A waiter polls a holder elsewhere at 2 ms doubling to 100 ms: given up at 130 ms, the lock
// would be seen at the poll at 226 ms. Held by this process, it is handed over at once.
TEST_F(repository_test, a_lock_given_up_in_this_process_goes_to_its_waiter_at_once) {
    auto redis = connect();
    keel::repository<order> orders(redis);
    keel::ref<order> o("o-8");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto held = co_await orders.lock(o);
        CO_ASSERT_TRUE(held.has_value());
        std::chrono::steady_clock::time_point given_up;
        std::optional<std::chrono::steady_clock::time_point> taken;
        auto wait_for_it = [&] {
            taken.reset();
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto next = co_await orders.lock(o, 2s);
                    EXPECT_TRUE(next.has_value());
                    taken = std::chrono::steady_clock::now();
                },
                asio::detached);
        };
        auto until_taken = [&]() -> asio::awaitable<void> {
            while (!taken) co_await pause(1ms);
        };
        wait_for_it();
        co_await pause(130ms);
        held->value() = order{"paid", 1};
        CO_ASSERT_TRUE((co_await held->save_and_release()).has_value());
        given_up = std::chrono::steady_clock::now();
        co_await until_taken();
        EXPECT_LT(*taken - given_up, 40ms);
        // Likewise after a release without a save.
        auto again = co_await orders.lock(o);
        CO_ASSERT_TRUE(again.has_value());
        wait_for_it();
        co_await pause(130ms);
        again->release();
        given_up = std::chrono::steady_clock::now();
        co_await until_taken();
        EXPECT_LT(*taken - given_up, 40ms);
    }());
}

TEST_F(repository_test, the_lock_is_renewed_while_held_and_released_on_scope_exit) {
    auto redis = connect();
    keel::repository<order> orders(redis, {.lock_ttl = 150ms, .lock_wait = 50ms});
    keel::ref<order> o("o-4");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        {
            auto held = co_await orders.lock(o);
            CO_ASSERT_TRUE(held.has_value());
            co_await pause(500ms);  // more than three TTLs: renewals keep it
            EXPECT_FALSE(held->lost());
            auto other = co_await orders.lock(o, 10ms);
            EXPECT_FALSE(other);
        }  // released here
        auto next = co_await orders.lock(o, 200ms);
        EXPECT_TRUE(next.has_value());
    }());
}

// In memory, lock waits run on the documents' clock: with a manual clock a waiter gets the
// lease the moment its holder lets go, and times out only when the test moves time on.
class memory_documents_test : public ::testing::Test {
  protected:
    void settle() {
        io.restart();
        io.poll();
    }
    using result = keel::expected<keel::locked<order>, keel::model_error>;
    // A lock() left waiting; its result lands in `out`.
    void lock_in_background(std::optional<result>& out, keel::ref<order> o) {
        asio::co_spawn(
            io,
            [&out, o, this]() -> asio::awaitable<void> { out.emplace(co_await orders.lock(o)); },
            asio::detached);
        settle();
    }

    asio::io_context io;
    keel::manual_clock clock;
    std::optional<keel::memory_documents> docs{std::in_place, clock, 5s};
    keel::repository<order> orders{*docs};
    keel::ref<order> o{"o-6"};
};

TEST_F(memory_documents_test, a_lock_wait_times_out_in_virtual_time) {
    auto held = keel::test::run(io, orders.lock(o));
    ASSERT_TRUE(held);
    std::optional<result> waiter;
    lock_in_background(waiter, o);
    EXPECT_FALSE(waiter);
    clock.advance(4999ms);
    settle();
    EXPECT_FALSE(waiter);
    clock.advance(1ms);
    settle();
    ASSERT_TRUE(waiter);
    ASSERT_FALSE(*waiter);
    EXPECT_EQ(waiter->error().kind, keel::model_error::code::lock_timeout);
}

TEST_F(memory_documents_test, a_waiter_gets_the_lease_when_its_holder_lets_go) {
    auto held = keel::test::run(io, orders.lock(o));
    ASSERT_TRUE(held);
    std::optional<result> waiter;
    lock_in_background(waiter, o);
    EXPECT_FALSE(waiter);
    held->release();
    settle();
    ASSERT_TRUE(waiter && *waiter);
    EXPECT_GT((*waiter)->token(), held->token());
    EXPECT_TRUE(docs->locked("order", "o-6"));
}

TEST_F(memory_documents_test, an_expired_lease_is_lost_and_the_next_holder_gets_it_at_once) {
    auto held = keel::test::run(io, orders.lock(o));
    ASSERT_TRUE(held);
    EXPECT_FALSE(docs->expire("order", "other"));
    ASSERT_TRUE(docs->expire("order", "o-6"));
    EXPECT_TRUE(held->lost());
    EXPECT_FALSE(docs->locked("order", "o-6"));
    auto next = keel::test::run(io, orders.lock(o, 0ms));
    EXPECT_TRUE(next);
}

TEST_F(memory_documents_test, waiters_and_leases_outliving_the_documents_fail_cleanly) {
    auto held = keel::test::run(io, orders.lock(o));
    ASSERT_TRUE(held);
    std::optional<result> waiter;
    lock_in_background(waiter, o);
    docs.reset();
    settle();
    ASSERT_TRUE(waiter);
    ASSERT_FALSE(*waiter);
    EXPECT_EQ(waiter->error().kind, keel::model_error::code::unavailable);
    EXPECT_TRUE(held->lost());
    held->value() = order{"late", 0};
    auto saved = keel::test::run(io, held->save());
    ASSERT_FALSE(saved);
    EXPECT_EQ(saved.error().kind, keel::model_error::code::lock_lost);
}

}  // namespace
