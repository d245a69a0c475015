// The process store while a shard's slot migrates on a real Redis Cluster.
//
// Redis Cluster moves a slot key by key: while it is half moved (MIGRATING on its owner,
// IMPORTING on the target, some keys on each), Redis refuses a command on a key that is not on
// the node, and a script refused half-way keeps what it wrote before (an idempotency key
// recorded without its signal was a signal lost for good). Each case makes one store call
// with each key of the shard moved alone first in turn (and with none moved), holds the slot
// half-migrated while the call runs, then completes the migration. The call must answer, and
// leave the shard, exactly as it does when the slot stays where it is.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <keel/framework/redis/slot.hpp>
#include <keel/framework/redis_documents.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/run.hpp>
#include <sstream>
#include <thread>

#include "store_fixture.hpp"

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using namespace keel::process;
using keel::process::testing_support::t0;
using keel::process::testing_support::ttl;

constexpr std::string_view awaited = "/payment/o-1/received";

// The payment, as every case delivers or emits it.
inbox_entry payment() {
    return inbox_entry{0, "tx-1", std::string(awaited), nlohmann::json{{"amount", 42}}, t0 + 2s};
}

journal_entry entry(std::uint64_t seq, std::string name) {
    return journal_entry{seq, op_kind::run, std::move(name), nlohmann::json(seq), false};
}

std::string lines_of(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) out += p + "\n";
    return out;
}

// The commit that completes an instance taken to resume (its journal: one entry).
commit_request completion(const std::string& id, const lease_token& lease, keel::time_point now) {
    commit_request c;
    c.instance = id;
    c.lease = lease;
    c.expected_length = 1;
    c.entries = {entry(1, "dispatch")};
    c.status = instance_status::completed;
    c.result = nlohmann::json{{"status", "done"}};
    c.release = true;
    c.now = now;
    return c;
}

// What a call answered, as text to compare.
std::string describe(const delivery& d) {
    return fmt::format("delivery {} waiting={} id={}", static_cast<int>(d.result), d.waiting, d.id);
}
std::string describe(const taken_instance& t) {
    return fmt::format("taken epoch={} length={} resumed={} inbox={} timers={}",
                       t.grant.lease.epoch, t.grant.journal_length, t.resumed,
                       t.snapshot.inbox.size(), t.snapshot.timers.size());
}
std::string describe(const fan_out_result& r) {
    std::string out = fmt::format("reached={} duplicate={}", r.reached, r.duplicate);
    for (const auto& [id, d] : r.delivered) out += " | " + id + ": " + describe(d);
    for (const auto& [id, t] : r.taken) out += " | " + id + ": " + describe(t);
    return out;
}
template <class T>
std::string describe(const keel::expected<T, store_error>& r) {
    if (!r) return "error " + std::string(to_string(r.error()));
    if constexpr (std::is_same_v<T, taken_instance>)
        return describe(*r);
    else
        return "ok";
}

class slot_migration : public ::testing::Test {
  protected:
    static constexpr std::size_t shards = 4;

    slot_migration()
        : conn(keel::test::connect_to_empty_shared_cluster(io)),
          st(conn, {.shards = shards, .audit_commits = true}) {
        keel::test::run(io, st.open());
    }

    keel::test::redis_cluster& cluster() { return keel::test::shared_redis_cluster(); }

    template <class T>
    T run(asio::awaitable<T> task) {
        return keel::test::run(io, std::move(task), 20s);
    }

    // Instance ids in the shard of `anchor`.
    std::string in_shard_of(const std::string& anchor, const std::string& name) {
        auto shard = shard_of(anchor, shards);
        for (int i = 0;; ++i) {
            auto id = fmt::format("{}-{}", name, i);
            if (shard_of(id, shards) == shard) return id;
        }
    }
    std::uint16_t slot_of_shard(const std::string& id) {
        return keel::redis::key_slot(st.wake_key(shard_of(id, shards)));
    }

    std::uint16_t other_primary(std::uint16_t slot) {
        auto owner = cluster().primary_of(slot);
        for (auto p : cluster().primaries())
            if (p != owner) return p;
        throw std::runtime_error("no other primary");
    }

    std::vector<std::string> keys_in(std::uint16_t slot) {
        std::istringstream listed(
            cluster().cli(cluster().primary_of(slot),
                          {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "1000"}));
        std::vector<std::string> keys;
        for (std::string k; std::getline(listed, k);)
            if (!k.empty()) keys.push_back(k);
        std::sort(keys.begin(), keys.end());
        return keys;
    }

    // Every key of the slot with its type and contents (hashes and sets in order), and
    // whether it expires.
    std::string dump(std::uint16_t slot) {
        std::vector<std::string> out;
        for (const auto& key : keys_in(slot)) {
            auto text = run([&]() -> asio::awaitable<std::string> {
                auto type = (co_await conn.exec("TYPE", key))->as_string().value_or("?");
                keel::redis::result contents = keel::redis::reply{};
                if (type == "string") contents = co_await conn.exec("GET", key);
                if (type == "list") contents = co_await conn.exec("LRANGE", key, "0", "-1");
                if (type == "zset")
                    contents = co_await conn.exec("ZRANGE", key, "0", "-1", "WITHSCORES");
                std::vector<std::string> items;
                if (type == "hash" || type == "set") {
                    auto all = co_await conn.exec(type == "hash" ? "HGETALL" : "SMEMBERS", key);
                    auto e = all->elements();
                    std::size_t step = type == "hash" ? 2 : 1;
                    for (std::size_t i = 0; i + step <= e.size(); i += step)
                        items.push_back(e[i].to_debug_string() +
                                        (step == 2 ? "=" + e[i + 1].to_debug_string() : ""));
                    std::sort(items.begin(), items.end());
                }
                auto pttl = (co_await conn.exec("PTTL", key))->integer().value_or(-3);
                std::string shown = items.empty() ? contents->to_debug_string() : lines_of(items);
                co_return fmt::format("{} {}{}: {}", key, type, pttl > 0 ? " (expires)" : "",
                                      shown);
            }());
            out.push_back(std::move(text));
        }
        return lines_of(out);
    }

    void empty_cluster() {
        run([&]() -> asio::awaitable<void> {
            auto flushed = co_await conn.exec("FLUSHALL");
            EXPECT_TRUE(flushed) << flushed.error().what();
        }());
    }

    // The check: `call` after `setup`, with the slot in place, then with each key of the
    // slot (and none) moved first while the call runs; the same answer and the same keys.
    void check(std::uint16_t slot, const std::function<asio::awaitable<void>()>& setup,
               const std::function<asio::awaitable<std::string>()>& call) {
        empty_cluster();
        run(setup());
        auto moved_first = keys_in(slot);
        ASSERT_FALSE(moved_first.empty());
        auto expected_answer = run(call());
        auto expected_state = dump(slot);
        moved_first.push_back("");  // the slot migrating, nothing moved yet
        for (const auto& first : moved_first) {
            SCOPED_TRACE(first.empty() ? "the slot migrating, no key moved"
                                       : "moved first: " + first);
            empty_cluster();
            run(setup());
            auto to = other_primary(slot);
            cluster().begin_migration(slot, to);
            if (!first.empty()) cluster().migrate_key(first, to);
            std::exception_ptr failed;
            std::thread finish([&] {
                std::this_thread::sleep_for(150ms);  // the call meets the half-moved slot
                try {
                    cluster().end_migration(slot, to);
                } catch (...) {
                    failed = std::current_exception();
                }
            });
            std::string answer;
            try {
                answer = run(call());
            } catch (const std::exception& e) {
                answer = std::string("threw: ") + e.what();
            }
            finish.join();
            if (failed) std::rethrow_exception(failed);
            EXPECT_EQ(answer, expected_answer);
            EXPECT_EQ(dump(slot), expected_state);
            if (HasFailure()) return;  // one key's story is enough to read
        }
    }

    // An instance as the hot path leaves one that waits for a payment: started running with
    // a subscription, its first step committed with a deadline and the wait (audited), and an
    // earlier signal with an idempotency key in its inbox. Every key an instance can have
    // exists, so the store's scripts run on the slot's owner until the key they need moves.
    asio::awaitable<void> waiting_for_payment(std::string id) {
        start_request req{id, "def", nlohmann::json::object(), "w1", t0, ttl};
        req.subscriptions = {std::string(awaited)};
        auto started = co_await st.start(std::move(req));
        EXPECT_TRUE(started.created);
        commit_request c;
        c.instance = id;
        c.lease = started.lease;
        c.entries = {entry(0, "reserve")};
        c.add_timers = {timer_record{1, t0 + 1h, "deadline"}};
        c.waits = std::vector<signal_wait>{{2, std::string(awaited)}};
        c.status = instance_status::suspended;
        c.release = true;
        c.now = t0;
        auto committed = co_await st.commit(std::move(c));
        EXPECT_TRUE(committed) << to_string(committed.error());
        inbox_entry note{0, "note-1", "/note/o-1", nlohmann::json{{"n", 1}}, t0 + 1s};
        co_await st.deliver(id, std::move(note));
    }

    // waiting_for_payment, the payment delivered, and the instance taken to resume by w2.
    asio::awaitable<lease_token> taken_to_resume(std::string id) {
        co_await waiting_for_payment(id);
        auto paid = payment();
        co_await st.deliver(id, std::move(paid));
        version_refusals none;
        auto taken = co_await st.take(id, "w2", t0 + 3s, ttl, std::move(none), std::nullopt);
        EXPECT_TRUE(taken && taken->resumed);
        co_return taken->grant.lease;
    }

    // Completed, and kept for its retention.
    asio::awaitable<void> completed(std::string id) {
        auto lease = co_await taken_to_resume(id);
        auto done = co_await st.commit(completion(id, lease, t0 + 4s));
        EXPECT_TRUE(done);
    }

    asio::io_context io;
    keel::redis::connection conn;
    redis_store st;
};

const std::string a = "order/o-1/fulfillment";

TEST_F(slot_migration, an_emit_reaches_its_subscriber_once) {
    check(
        slot_of_shard(a), [&] { return waiting_for_payment(a); },
        [&]() -> asio::awaitable<std::string> {
            fan_out_request emit;
            emit.subscriptions = {std::string(awaited)};
            emit.signal = payment();
            co_return describe(co_await st.fan_out(std::move(emit)));
        });
}

TEST_F(slot_migration, an_emit_that_takes_its_subscriber_takes_it_once) {
    check(
        slot_of_shard(a), [&] { return waiting_for_payment(a); },
        [&]() -> asio::awaitable<std::string> {
            fan_out_request emit;
            emit.subscriptions = {std::string(awaited)};
            emit.signal = payment();
            emit.take = fan_out_request::taker{"w2", t0 + 2s, ttl, {}};
            co_return describe(co_await st.fan_out(std::move(emit)));
        });
}

TEST_F(slot_migration, a_delivery_is_stored_once) {
    check(
        slot_of_shard(a), [&] { return waiting_for_payment(a); },
        [&]() -> asio::awaitable<std::string> {
            auto paid = payment();
            co_return describe(co_await st.deliver(a, std::move(paid)));
        });
}

TEST_F(slot_migration, a_take_leases_once) {
    check(
        slot_of_shard(a),
        [&]() -> asio::awaitable<void> {
            co_await waiting_for_payment(a);
            auto paid = payment();
            co_await st.deliver(a, std::move(paid));
        },
        [&]() -> asio::awaitable<std::string> {
            version_refusals none;
            co_return describe(
                co_await st.take(a, "w2", t0 + 3s, ttl, std::move(none), std::nullopt));
        });
}

TEST_F(slot_migration, a_renewal_of_a_resumed_instance_moves_it_to_running_once) {
    lease_token lease;
    check(
        slot_of_shard(a), [&]() -> asio::awaitable<void> { lease = co_await taken_to_resume(a); },
        [&]() -> asio::awaitable<std::string> {
            co_return fmt::format("renewed={}", co_await st.renew(a, lease, t0 + 20s, ttl));
        });
}

TEST_F(slot_migration, a_failed_attempt_is_noted_once) {
    lease_token lease;
    check(
        slot_of_shard(a), [&]() -> asio::awaitable<void> { lease = co_await taken_to_resume(a); },
        [&]() -> asio::awaitable<std::string> {
            step_attempt failed{1, "dispatch", 1, "carrier down", "w2", t0 + 5s};
            auto noted = co_await st.note_attempt(a, lease, std::move(failed));
            co_return fmt::format("noted={}", noted);
        });
}

TEST_F(slot_migration, a_commit_that_consumes_the_signal_is_applied_whole) {
    lease_token lease;
    check(
        slot_of_shard(a), [&]() -> asio::awaitable<void> { lease = co_await taken_to_resume(a); },
        [&]() -> asio::awaitable<std::string> {
            commit_request c;
            c.instance = a;
            c.lease = lease;
            c.expected_length = 1;
            c.entries = {journal_entry{2, op_kind::signal, std::string(awaited), {}, false}};
            c.consume = {2};  // the payment: the second signal delivered
            c.cancel_timers = {1};
            c.waits = std::vector<signal_wait>{};
            c.status = instance_status::running;
            c.now = t0 + 5s;
            co_return describe(co_await st.commit(std::move(c)));
        });
}

TEST_F(slot_migration, a_step_appended_is_appended_once) {
    lease_token lease;
    check(
        slot_of_shard(a),
        [&]() -> asio::awaitable<void> {
            start_request req{a, "def", nlohmann::json::object(), "w1", t0, ttl};
            lease = (co_await st.start(std::move(req))).lease;
        },
        [&]() -> asio::awaitable<std::string> {
            commit_request c;
            c.instance = a;
            c.lease = lease;
            c.entries = {entry(0, "reserve")};
            c.now = t0 + 1s;
            co_return describe(co_await st.commit(std::move(c)));
        });
}

TEST_F(slot_migration, a_completion_is_applied_whole) {
    lease_token lease;
    check(
        slot_of_shard(a), [&]() -> asio::awaitable<void> { lease = co_await taken_to_resume(a); },
        [&]() -> asio::awaitable<std::string> {
            co_return describe(co_await st.commit(completion(a, lease, t0 + 5s)));
        });
}

// Continue as new: the journal and timers deleted, the params replaced, in one script.
TEST_F(slot_migration, a_restart_is_applied_whole) {
    lease_token lease;
    check(
        slot_of_shard(a), [&]() -> asio::awaitable<void> { lease = co_await taken_to_resume(a); },
        [&]() -> asio::awaitable<std::string> {
            auto c = completion(a, lease, t0 + 5s);
            c.status = instance_status::running;
            c.result.reset();
            c.waits = std::vector<signal_wait>{};
            c.restart_params = nlohmann::json::array({"o-1", 2});
            co_return describe(co_await st.commit(std::move(c)));
        });
}

TEST_F(slot_migration, a_start_creates_once) {
    auto b = in_shard_of(a, "order/o-2");
    check(
        slot_of_shard(a), [&] { return waiting_for_payment(a); },
        [&]() -> asio::awaitable<std::string> {
            start_request req{b, "def", nlohmann::json::object(), "w1", t0 + 1s, ttl};
            req.subscriptions = {"/payment/o-2/received"};
            auto started = co_await st.start(std::move(req));
            co_return fmt::format("created={} status={}", started.created,
                                  static_cast<int>(started.status));
        });
}

TEST_F(slot_migration, a_claim_of_due_work_is_made_once) {
    auto c = in_shard_of(a, "order/o-3");
    check(
        slot_of_shard(a),
        [&]() -> asio::awaitable<void> {
            co_await waiting_for_payment(a);  // its deadline is due at t0 + 1h
            co_await completed(c);            // its retention ends at t0 + 7 days
        },
        [&]() -> asio::awaitable<std::string> {
            std::string out;
            for (const auto& id : co_await st.due(t0 + 8 * 24h, 10)) out += id + " ";
            co_return out;
        });
}

TEST_F(slot_migration, an_operator_retry_rewinds_once) {
    check(
        slot_of_shard(a), [&] { return completed(a); },
        [&]() -> asio::awaitable<std::string> {
            rewind_request again{a, 2, 0, {}, t0 + 1h};
            co_return describe(co_await st.rewind(std::move(again)));
        });
}

// The entity documents (redis_documents) are in their own slot, "{<model>:<id>}".
TEST_F(slot_migration, a_document_written_under_its_lock_is_written_once) {
    keel::redis_documents docs(conn);
    auto slot = keel::redis::key_slot(docs.key("order", "o-1", "doc"));
    check(
        slot,
        [&]() -> asio::awaitable<void> {
            auto put = co_await docs.put("order", "o-1", R"({"status":"created"})");
            EXPECT_TRUE(put);
            // The fence counter exists once a lock was taken: every key of the slot then does.
            auto first = co_await docs.lock("order", "o-1", 1s);
            EXPECT_TRUE(first);
            if (!first) co_return;
            auto saved = co_await first->lease->save_and_release(R"({"status":"new"})");
            EXPECT_TRUE(saved);
        },
        [&]() -> asio::awaitable<std::string> {
            auto locked = co_await docs.lock("order", "o-1", 5s);
            if (!locked) co_return "lock: " + locked.error().message;
            auto saved = co_await locked->lease->save_and_release(R"({"status":"paid"})");
            co_return fmt::format("token={} saved={}", locked->lease->token(),
                                  saved ? "yes" : saved.error().message);
        });
}

TEST_F(slot_migration, a_conditional_document_write_is_written_once) {
    keel::redis_documents docs(conn, {.recent_bytes = 0});
    auto slot = keel::redis::key_slot(docs.key("order", "o-1", "doc"));
    check(
        slot,
        [&]() -> asio::awaitable<void> {
            auto put = co_await docs.put("order", "o-1", R"({"status":"created"})");
            EXPECT_TRUE(put);
        },
        [&]() -> asio::awaitable<std::string> {
            auto written = co_await docs.put_if("order", "o-1", R"({"status":"created"})",
                                                R"({"status":"paid"})");
            co_return written ? fmt::format("put_if={}", static_cast<int>(*written))
                              : written.error().message;
        });
}

// A queue's keys share the queue's hash tag: entries, dedup ids, the ring of partitions, the
// admitted set, the per-partition counts, the rate window, the sequence, the waiting counts
// and one line per partition. Every script declares each key it touches, so a migrating
// slot refuses the whole call rather than a part of it.
const queue billing{.name = "billing", .concurrency = 1, .rate = 100, .per = 1s};

std::string describe(const enqueued& e) {
    return fmt::format("enqueued {} fresh={} admitted={}", e.instance, e.fresh, e.admitted);
}

std::string describe(const admission_round& r) {
    std::string out = fmt::format("waiting={}", r.waiting);
    for (const auto& a : r.admitted) out += fmt::format(" | {} fresh={}", a.instance, a.fresh);
    return out;
}

class queue_slot_migration : public slot_migration {
  protected:
    std::uint16_t queue_slot() { return keel::redis::key_slot("{" + billing.name + "}"); }

    asio::awaitable<enqueued> put(std::string id, std::string partition, std::string dedup,
                                  keel::time_point at) {
        queue_entry e{std::move(id),
                      enqueue_options{.partition = std::move(partition), .dedup = std::move(dedup)},
                      at};
        co_return co_await st.enqueue(billing, std::move(e), 30s);
    }

    // One admitted (the queue's only slot) and two waiting in two partitions.
    asio::awaitable<void> one_admitted_two_waiting() {
        EXPECT_TRUE((co_await put("q-0", "acme", "d-0", t0)).admitted);
        EXPECT_FALSE((co_await put("q-1", "acme", "d-1", t0 + 1ms)).admitted);
        EXPECT_FALSE((co_await put("q-2", "globex", "d-2", t0 + 2ms)).admitted);
    }
};

TEST_F(queue_slot_migration, an_enqueue_that_waits_is_queued_whole) {
    check(
        queue_slot(), [&] { return one_admitted_two_waiting(); },
        [&]() -> asio::awaitable<std::string> {
            co_return describe(co_await put("q-3", "acme", "d-3", t0 + 3ms));
        });
}

TEST_F(queue_slot_migration, an_enqueue_admitted_at_once_is_admitted_whole) {
    check(
        queue_slot(),
        [&]() -> asio::awaitable<void> {
            co_await one_admitted_two_waiting();
            co_await st.leave_queue(billing.name, "q-1");
            co_await st.leave_queue(billing.name, "q-2");
            co_await st.leave_queue(billing.name, "q-0");
        },
        [&]() -> asio::awaitable<std::string> {
            co_return describe(co_await put("q-3", "acme", "d-3", t0 + 3ms));
        });
}

TEST_F(queue_slot_migration, an_admission_round_admits_whole) {
    check(
        queue_slot(),
        [&]() -> asio::awaitable<void> {
            co_await one_admitted_two_waiting();
            co_await st.leave_queue(billing.name, "q-0");
        },
        [&]() -> asio::awaitable<std::string> {
            co_return describe(co_await st.admit(billing, t0 + 1s, 10, 30s));
        });
}

TEST_F(queue_slot_migration, a_waiting_entry_leaves_whole) {
    check(
        queue_slot(), [&] { return one_admitted_two_waiting(); },
        [&]() -> asio::awaitable<std::string> {
            co_await st.leave_queue(billing.name, "q-2");
            auto state = co_await st.describe_queue(billing.name, 10);
            co_return fmt::format("waiting={} admitted={}", state.waiting, state.admitted);
        });
}

TEST_F(queue_slot_migration, an_admitted_entry_leaves_whole) {
    check(
        queue_slot(), [&] { return one_admitted_two_waiting(); },
        [&]() -> asio::awaitable<std::string> {
            co_await st.leave_queue(billing.name, "q-0");
            auto state = co_await st.describe_queue(billing.name, 10);
            co_return fmt::format("waiting={} admitted={}", state.waiting, state.admitted);
        });
}

}  // namespace
