// repository<T> and locked<T> against a real redis-server.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
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

class repository_test : public ::testing::Test {
  protected:
    keel::redis::connection connect() {
        return keel::redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    }
    asio::io_context io;
    keel::test::redis_server server;
};

TEST_F(repository_test, get_put_remove) {
    auto redis = connect();
    keel::repository<order> orders(redis);
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
    }());
    EXPECT_EQ(server.cli({"EXISTS", "keel:{order:o-1}:doc"}), "0");
}

TEST_F(repository_test, a_document_that_does_not_decode_is_an_error_not_a_crash) {
    auto redis = connect();
    keel::repository<order> orders(redis);
    server.cli({"SET", "keel:{order:bad}:doc", "{\"status\": 42}"});
    keel::test::run(io, [&]() -> asio::awaitable<void> {
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

TEST_F(repository_test, two_holders_never_overlap) {
    auto redis = connect();
    keel::repository<order> orders(redis, {.lock_wait = 10s});
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

TEST_F(repository_test, a_stale_holder_cannot_write) {
    auto redis = connect();
    keel::repository<order> orders(redis, {.lock_wait = 1s});
    keel::ref<order> o("o-2");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        const order created{"created", 0};
        co_await orders.put(o, created);
        auto first = co_await orders.lock(o);
        CO_ASSERT_TRUE(first.has_value());
        server.cli({"DEL", "keel:{order:o-2}:lock"});  // as if the lease expired during a pause
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
    }());
}

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

}  // namespace
