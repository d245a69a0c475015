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

// The documents given, every call passed on, except put_if(): documents' own, which takes the
// lease (what an implementation without a one-step put_if gets).
class forwarding_documents : public keel::documents {
  public:
    explicit forwarding_documents(keel::documents& inner) : inner_(inner) {}

    asio::awaitable<keel::expected<std::optional<std::string>, keel::model_error>> get(
        std::string model, std::string id) override {
        return inner_.get(std::move(model), std::move(id));
    }
    asio::awaitable<keel::expected<void, keel::model_error>> put(std::string model, std::string id,
                                                                 std::string json) override {
        return inner_.put(std::move(model), std::move(id), std::move(json));
    }
    asio::awaitable<keel::expected<bool, keel::model_error>> remove(std::string model,
                                                                    std::string id) override {
        return inner_.remove(std::move(model), std::move(id));
    }
    asio::awaitable<keel::expected<acquired, keel::model_error>> lock(
        std::string model, std::string id, std::chrono::milliseconds wait) override {
        return inner_.lock(std::move(model), std::move(id), wait);
    }
    std::chrono::milliseconds lock_wait() const noexcept override { return inner_.lock_wait(); }

  protected:
    keel::documents& inner_;
};

// The documents given, with another writer whose write lands once, between a read and the
// conditional write that follows it.
class interleaved_writer final : public forwarding_documents {
  public:
    interleaved_writer(keel::documents& inner, std::string other)
        : forwarding_documents(inner), other_(std::move(other)) {}

    asio::awaitable<keel::expected<put_if_result, keel::model_error>> put_if(
        std::string model, std::string id, std::optional<std::string> expected,
        std::string json) override {
        if (!std::exchange(written_, true)) {
            auto other = co_await inner_.put(model, id, other_);
            EXPECT_TRUE(other.has_value());
        }
        co_return co_await inner_.put_if(std::move(model), std::move(id), std::move(expected),
                                         std::move(json));
    }

  private:
    std::string other_;
    bool written_ = false;
};

// The same cases on each keel::documents: "redis" or "memory", and "lease_put_if": memory's,
// with documents' default put_if() over its leases.
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
        if (redis) {
            docs = std::make_unique<keel::redis_documents>(
                *redis, keel::repository_options{.lock_wait = lock_wait});
            return *docs;
        }
        memory = std::make_unique<keel::memory_documents>(clock, lock_wait);
        if (GetParam() == "lease_put_if")
            docs = std::make_unique<forwarding_documents>(*memory);
        else
            docs.reset();
        return docs ? *docs : *memory;
    }
    // Takes the lease from its holder, as when it expires during the holder's pause.
    void expire_lock(std::string_view model, std::string_view id) {
        if (server)
            server->cli({"DEL", "keel:{" + std::string(model) + ":" + std::string(id) + "}:lock"});
        else
            ASSERT_TRUE(memory->expire(model, id));
    }

    asio::io_context io;
    keel::system_clock clock;
    std::optional<keel::test::redis_server> server;
    std::optional<keel::redis::connection> redis;
    std::unique_ptr<keel::memory_documents> memory;
    std::unique_ptr<keel::documents> docs;  // the Redis one, or a wrapper of memory
};

INSTANTIATE_TEST_SUITE_P(on, documents_test, ::testing::Values("redis", "memory", "lease_put_if"),
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
    if (server) {
        EXPECT_EQ(server->cli({"EXISTS", "keel:{order:o-1}:doc"}), "0");
    }
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

// ---- update(): optimistic read-modify-write ----

// Increments the counter, creating the order when there is none.
auto increment(int& calls) {
    return [&calls](std::optional<order>& o) {
        ++calls;
        if (!o) o = order{"new", 0};
        ++o->counter;
        return true;
    };
}

TEST_P(documents_test, update_creates_changes_and_writes_nothing_when_told_so) {
    auto* orders_store = &documents();
    keel::repository<order> orders(*orders_store);
    keel::ref<order> o("u-1");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        int calls = 0;
        auto create = increment(calls);
        auto created = co_await orders.update(o, create);
        CO_ASSERT_TRUE(created.has_value());
        EXPECT_EQ((*created)->counter, 1);
        auto again = co_await orders.update(o, create);
        EXPECT_EQ((*again)->counter, 2);
        EXPECT_EQ(calls, 2);
        auto nothing = [](std::optional<order>& x) {
            x->status = "not written";
            return false;
        };
        auto unchanged = co_await orders.update(o, nothing);
        CO_ASSERT_TRUE(unchanged.has_value());
        EXPECT_EQ((*unchanged)->status, "not written");  // as the change left it
        auto stored = co_await orders.get(o);
        EXPECT_EQ((*stored)->status, "new");
        EXPECT_EQ((*stored)->counter, 2);
        auto absent = [](std::optional<order>& x) { return x.has_value(); };
        auto none = co_await orders.update(keel::ref<order>("u-absent"), absent);
        CO_ASSERT_TRUE(none.has_value());
        EXPECT_FALSE(none->has_value());
        auto emptied = [](std::optional<order>& x) {
            x.reset();
            return true;
        };
        auto refused = co_await orders.update(o, emptied);
        CO_ASSERT_TRUE(!refused);
        EXPECT_EQ(refused.error().kind, keel::model_error::code::invalid_document);
        auto bad = co_await orders_store->put("order", "u-bad", "{\"status\": 42}");
        CO_ASSERT_TRUE(bad.has_value());
        auto undecodable = co_await orders.update(keel::ref<order>("u-bad"), create);
        CO_ASSERT_TRUE(!undecodable);
        EXPECT_EQ(undecodable.error().kind, keel::model_error::code::invalid_document);
    }());
}

// Another writer between update()'s read and its write: the write is refused, update() reads
// again and applies the change to what the other wrote.
TEST_P(documents_test, update_reads_again_when_the_entity_changed_since_it_read_it) {
    interleaved_writer docs(documents(), R"({"status":"paid","counter":100})");
    keel::repository<order> orders(docs);
    keel::ref<order> o("u-2");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        const order first{"created", 1};
        co_await orders.put(o, first);
        int calls = 0;
        auto add = increment(calls);
        auto now = co_await orders.update(o, add);
        CO_ASSERT_TRUE(now.has_value());
        EXPECT_EQ(calls, 2);
        EXPECT_EQ((*now)->counter, 101);
        auto stored = co_await orders.get(o);
        EXPECT_EQ((*stored)->status, "paid");
        EXPECT_EQ((*stored)->counter, 101);
    }());
}

// Holds r's lock while create(r, value) runs, then saves (holder_writes) or lets go: create
// must answer false, or true and have written. Of an entity that does not exist, create must
// wait for the holder (it may answer at once that one exists).
asio::awaitable<void> create_under_a_lock(keel::repository<order>& orders, keel::ref<order> r,
                                          const order& value, bool holder_writes) {
    auto held = co_await orders.lock(r);
    CO_ASSERT_TRUE(held.has_value());
    std::optional<bool> made;
    auto creating = [&]() -> asio::awaitable<void> {
        auto c = co_await orders.create(r, value);
        EXPECT_TRUE(c.has_value());
        made = c.value_or(false);
    };
    asio::co_spawn(co_await asio::this_coro::executor, creating, asio::detached);
    co_await pause(20ms);
    if (!holder_writes) {
        EXPECT_FALSE(made);
    }
    if (holder_writes) {
        (*held)->counter = 40;
        CO_ASSERT_TRUE((co_await held->save_and_release()).has_value());
    } else {
        held->release();
    }
    for (int i = 0; i < 200 && !made; ++i) co_await pause(5ms);
    CO_ASSERT_TRUE(made.has_value());
    EXPECT_EQ(*made, !holder_writes);
}

TEST_P(documents_test, create_writes_only_when_there_is_none) {
    keel::repository<order> orders(documents(2s));
    keel::ref<order> o("c-1"), held_empty("c-2");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        const order first{"created", 1}, second{"other", 2};
        auto created = co_await orders.create(o, first);
        CO_ASSERT_TRUE(created.has_value());
        EXPECT_TRUE(*created);
        auto again = co_await orders.create(o, second);
        CO_ASSERT_TRUE(again.has_value());
        EXPECT_FALSE(*again);
        auto stored = co_await orders.get(o);
        EXPECT_EQ((*stored)->status, "created");

        // While a lock is held, create waits for it and decides on what its holder left.
        co_await create_under_a_lock(orders, o, second, true);
        co_await create_under_a_lock(orders, held_empty, second, false);
        auto now = co_await orders.get(o);
        EXPECT_EQ((*now)->counter, 40);  // the holder's
        now = co_await orders.get(held_empty);
        EXPECT_EQ((*now)->counter, 2);  // create's
    }());
}

TEST_P(documents_test, concurrent_updates_lose_no_change) {
    keel::repository<order> orders(documents(10s));
    keel::ref<order> o("u-3");
    constexpr int writers = 30;
    int calls = 0;
    keel::test::run_concurrently(io, writers, [&](int) {
        return [&]() -> asio::awaitable<void> {
            auto add = increment(calls);
            auto r = co_await orders.update(o, add);
            EXPECT_TRUE(r.has_value());
        };
    });
    auto final_state = keel::test::run(io, orders.get(o));
    EXPECT_EQ((*final_state)->counter, writers);
    EXPECT_GE(calls, writers);
}

// A lock holder excludes update(): it waits for the lock, then changes what the holder saved.
TEST_P(documents_test, update_waits_for_a_lock_holder_and_times_out_like_lock) {
    keel::repository<order> orders(documents(300ms));
    keel::ref<order> o("u-4");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto held = co_await orders.lock(o);
        CO_ASSERT_TRUE(held.has_value());
        held->value() = order{"created", 10};
        int calls = 0;
        bool updated = false;
        asio::co_spawn(
            co_await asio::this_coro::executor,
            [&]() -> asio::awaitable<void> {
                auto add = increment(calls);
                auto r = co_await orders.update(o, add);
                EXPECT_TRUE(r.has_value());
                updated = true;
            },
            asio::detached);
        co_await pause(30ms);
        EXPECT_FALSE(updated);
        EXPECT_EQ((*(co_await orders.get(o))), std::nullopt);  // nothing written meanwhile
        CO_ASSERT_TRUE((co_await held->save_and_release()).has_value());
        for (int i = 0; i < 200 && !updated; ++i) co_await pause(5ms);
        EXPECT_TRUE(updated);
        auto now = co_await orders.get(o);
        CO_ASSERT_TRUE(now.has_value() && now->has_value());
        EXPECT_EQ((**now).counter, 11);

        auto blocker = co_await orders.lock(o);  // held past the lock wait
        CO_ASSERT_TRUE(blocker.has_value());
        auto add = increment(calls);
        auto timed_out = co_await orders.update(o, add);
        CO_ASSERT_TRUE(!timed_out);
        EXPECT_EQ(timed_out.error().kind, keel::model_error::code::lock_timeout);
        auto after = co_await orders.get(o);
        CO_ASSERT_TRUE(after.has_value() && after->has_value());
        EXPECT_EQ((**after).counter, 11);
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

// The Redis commands a step runs, by name ("evalsha", "get"): their calls in INFO
// commandstats, scripts' own commands included.
class command_counter {
  public:
    explicit command_counter(keel::test::redis_server& server) : server_(server) {}
    int calls_of(std::string_view command) const {
        auto stats = server_.cli({"INFO", "commandstats"});
        auto label = "cmdstat_" + std::string(command) + ":calls=";
        auto at = stats.find(label);
        return at == std::string::npos ? 0 : std::stoi(stats.substr(at + label.size()));
    }

  private:
    keel::test::redis_server& server_;
};

auto set_status(std::string status) {
    return [status = std::move(status)](std::optional<order>& x) {
        x->status = status;
        return true;
    };
}

// update() of an entity this process has not seen: one GET, then one script; of one it
// wrote last: the script alone. No lock or fence key is ever made.
TEST_F(repository_test, an_uncontended_update_is_one_script_and_a_read_only_when_not_known) {
    auto redis = connect();
    keel::repository<order> orders(redis);
    keel::ref<order> o("u-5");
    command_counter count(server);
    server.cli({"SET", "keel:{order:u-5}:doc", R"({"counter":1,"status":"created"})"});
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        int scripts = count.calls_of("evalsha"), reads = count.calls_of("get");
        CO_ASSERT_TRUE((co_await orders.update(o, set_status("paid"))).has_value());
        EXPECT_EQ(count.calls_of("evalsha") - scripts, 1);
        EXPECT_EQ(count.calls_of("get") - reads, 2);  // update's read, and the script's check

        scripts = count.calls_of("evalsha"), reads = count.calls_of("get");
        CO_ASSERT_TRUE((co_await orders.update(o, set_status("shipped"))).has_value());
        EXPECT_EQ(count.calls_of("evalsha") - scripts, 1);
        EXPECT_EQ(count.calls_of("get") - reads, 1);  // the script's check alone

        const order created{"created", 7};
        co_await orders.put(keel::ref<order>("u-6"), created);
        reads = count.calls_of("get");
        CO_ASSERT_TRUE((co_await orders.update(keel::ref<order>("u-6"), set_status("paid"))));
        EXPECT_EQ(count.calls_of("get") - reads, 1);
    }());
    EXPECT_EQ(server.cli({"GET", "keel:{order:u-5}:doc"}), R"({"counter":1,"status":"shipped"})");
    EXPECT_EQ(server.cli({"GET", "keel:{order:u-6}:doc"}), R"({"counter":7,"status":"paid"})");
    EXPECT_EQ(server.cli({"EXISTS", "keel:{order:u-5}:fence"}), "0");
}

// Another process changes the entity after this one wrote it last: the conditional write from
// the remembered version is refused with the stored document, and the change runs again on
// that, still without a GET of its own.
TEST_F(repository_test, an_update_from_a_stale_remembered_version_applies_to_the_stored_one) {
    auto here = connect(), elsewhere = connect();
    keel::repository<order> orders(here), theirs(elsewhere);
    keel::ref<order> o("u-7");
    command_counter count(server);
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        const order created{"created", 1};
        co_await orders.put(o, created);
        int calls = 0;
        auto add = increment(calls);
        CO_ASSERT_TRUE((co_await theirs.update(o, add)).has_value());  // counter 2, elsewhere
        calls = 0;
        int scripts = count.calls_of("evalsha"), reads = count.calls_of("get");
        auto now = co_await orders.update(o, add);
        CO_ASSERT_TRUE(now.has_value());
        EXPECT_EQ(calls, 2);  // on the remembered counter 1, then on the stored 2
        EXPECT_EQ((*now)->counter, 3);
        EXPECT_EQ(count.calls_of("evalsha") - scripts, 2);
        EXPECT_EQ(count.calls_of("get") - reads, 2);  // the two scripts' checks
        auto stored = co_await orders.get(o);
        EXPECT_EQ((*stored)->counter, 3);
    }());
}

// create() on Redis: the one script, nothing read before it.
TEST_F(repository_test, create_is_one_script_without_a_read) {
    auto redis = connect();
    keel::repository<order> orders(redis);
    command_counter count(server);
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        const order created{"created", 1};
        for (bool expected : {true, false}) {
            int scripts = count.calls_of("evalsha"), reads = count.calls_of("get");
            auto c = co_await orders.create(keel::ref<order>("c-3"), created);
            CO_ASSERT_TRUE(c.has_value());
            EXPECT_EQ(*c, expected);
            EXPECT_EQ(count.calls_of("evalsha") - scripts, 1);
            EXPECT_EQ(count.calls_of("get") - reads, 1);  // the script's check
        }
    }());
}

// With recent_bytes 0 nothing is remembered: every update reads first.
TEST_F(repository_test, without_a_budget_for_recent_documents_every_update_reads_first) {
    auto redis = connect();
    keel::repository<order> orders(redis, {.recent_bytes = 0});
    keel::ref<order> o("u-8");
    command_counter count(server);
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        const order created{"created", 1};
        co_await orders.put(o, created);
        for (auto status : {"paid", "shipped"}) {
            int reads = count.calls_of("get");
            CO_ASSERT_TRUE((co_await orders.update(o, set_status(status))).has_value());
            EXPECT_EQ(count.calls_of("get") - reads, 2);
        }
    }());
}

// A lock holder's save is not seen by the remembered version: the update after it starts
// from the stored document.
TEST_F(repository_test, an_update_after_a_lock_holders_save_changes_what_it_saved) {
    auto redis = connect();
    keel::repository<order> orders(redis);
    keel::ref<order> o("u-9");
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        int calls = 0;
        auto add = increment(calls);
        CO_ASSERT_TRUE((co_await orders.update(o, add)).has_value());  // counter 1, remembered
        auto held = co_await orders.lock(o);
        CO_ASSERT_TRUE(held.has_value());
        (*held)->counter = 50;
        CO_ASSERT_TRUE((co_await held->save_and_release()).has_value());
        calls = 0;
        auto now = co_await orders.update(o, add);
        CO_ASSERT_TRUE(now.has_value());
        EXPECT_EQ((*now)->counter, 51);
        EXPECT_EQ(calls, 1);  // the lock forgot the remembered version: read, not refused
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
