// A commit that carries entity documents (document_write, what context::update leaves to the
// commit of its step), on redis_store with redis_documents on the same connection: the
// documents and the commit are written together or not at all, each document only while it
// is as its writer read it and unlocked.

#include <gtest/gtest.h>

#include <keel/framework/redis_documents.hpp>
#include <keel/process/memory_store.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/process/testing/loop.hpp>
#include <keel/test/redis_server.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;

struct document_commits : ::testing::Test {
    document_commits() {
        loop.wait_for_io([this] { return !backend.idle(); });
    }

    template <class T>
    T sync(asio::awaitable<T> task) {
        return loop.run(std::move(task));
    }

    lease_token start(const std::string& id) {
        auto r = sync(s.start(start_request{id, "/def", nlohmann::json::array(), "w1", now, 30s}));
        EXPECT_TRUE(r.created);
        return r.lease;
    }
    // A step's commit (an append, unless `general`) that writes `text` over `expected`.
    commit_request step(const std::string& id, lease_token lease,
                        std::optional<std::string> expected, std::string text,
                        bool general = false) {
        commit_request req;
        req.instance = id;
        req.lease = std::move(lease);
        req.expected_length = 0;
        req.entries.push_back(journal_entry{0, op_kind::run, "step", true, false});
        if (general) req.status = instance_status::running;  // stated: the general script
        auto where = docs.address("order", "o-1").value();
        req.documents.push_back(
            document_write{where.key, where.lock, std::move(expected), std::move(text)});
        return req;
    }
    std::string stored() { return server.cli({"GET", "keel:{order:o-1}:doc"}); }
    std::size_t journal_length(const std::string& id) {
        return sync(s.load(id, true))->journal.size();
    }

    testing::loop loop;
    test::redis_backend backend{loop.io()};
    redis_store& s = backend.s;
    keel::test::redis_server& server = backend.server;
    redis_documents docs{backend.conn};
    time_point now = time_point{} + std::chrono::hours(1000);
};

TEST_F(document_commits, the_store_writes_documents_on_its_own_single_server_only) {
    EXPECT_TRUE(s.writes_documents(docs.address("order", "o-1").value()));
    auto elsewhere = redis::connection::create(loop.io().get_executor(), {.url = server.url()});
    redis_documents other(elsewhere.value());
    EXPECT_FALSE(s.writes_documents(other.address("order", "o-1").value()));
    EXPECT_FALSE(s.writes_documents(document_address{}));
}

TEST_F(document_commits, a_store_that_cannot_write_documents_refuses_a_commit_with_some) {
    memory_store memory;
    EXPECT_FALSE(memory.writes_documents(docs.address("order", "o-1").value()));
    auto r =
        sync(memory.start(start_request{"m", "/def", nlohmann::json::array(), "w1", now, 30s}));
    auto req = step("m", r.lease, std::nullopt, "v1");
    EXPECT_THROW((void)sync(memory.commit(std::move(req))), std::logic_error);
    EXPECT_EQ(sync(memory.load("m", true))->journal.size(), 0u);
}

TEST_F(document_commits, a_document_as_expected_is_written_with_the_step) {
    for (bool general : {false, true}) {
        SCOPED_TRACE(general ? "general commit" : "append");
        std::string id = general ? "b" : "a";
        server.cli({"SET", "keel:{order:o-1}:doc", "v1"});
        auto lease = start(id);
        auto r = sync(s.commit(step(id, lease, "v1", "v2", general)));
        ASSERT_TRUE(r.has_value()) << to_string(r.error());
        EXPECT_EQ(stored(), "v2");
        EXPECT_EQ(journal_length(id), 1u);
    }
}

TEST_F(document_commits, a_document_created_by_the_step_must_not_exist_before) {
    auto lease = start("a");
    ASSERT_TRUE(sync(s.commit(step("a", lease, std::nullopt, "new"))).has_value());
    EXPECT_EQ(stored(), "new");

    auto other = start("b");
    auto r = sync(s.commit(step("b", other, std::nullopt, "newer")));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), store_error::document_changed);
    EXPECT_EQ(stored(), "new");
    EXPECT_EQ(journal_length("b"), 0u);
}

TEST_F(document_commits, a_changed_or_locked_document_fails_the_whole_commit) {
    for (bool general : {false, true}) {
        SCOPED_TRACE(general ? "general commit" : "append");
        std::string id = general ? "b" : "a";
        server.cli({"SET", "keel:{order:o-1}:doc", "changed"});
        auto lease = start(id);
        auto r = sync(s.commit(step(id, lease, "v1", "v2", general)));
        ASSERT_FALSE(r.has_value());
        EXPECT_EQ(r.error(), store_error::document_changed);
        EXPECT_EQ(stored(), "changed");
        EXPECT_EQ(journal_length(id), 0u);

        server.cli({"SET", "keel:{order:o-1}:lock", "7"});
        r = sync(s.commit(step(id, lease, "changed", "v2", general)));
        ASSERT_FALSE(r.has_value());
        EXPECT_EQ(r.error(), store_error::document_changed);
        EXPECT_EQ(stored(), "changed");
        EXPECT_EQ(journal_length(id), 0u);
        server.cli({"DEL", "keel:{order:o-1}:lock"});
    }
}

TEST_F(document_commits, a_refused_document_leaves_the_consumed_signal_in_the_inbox) {
    server.cli({"SET", "keel:{order:o-1}:doc", "changed"});
    auto lease = start("a");
    inbox_entry signal{0, "k", "/go", nlohmann::json(1), now};
    auto delivered = sync(s.deliver("a", signal));
    ASSERT_EQ(delivered.result, delivery::outcome::stored);
    auto req = step("a", lease, "v1", "v2");
    req.consume.push_back(delivered.id);
    auto r = sync(s.commit(std::move(req)));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), store_error::document_changed);
    EXPECT_EQ(sync(s.load("a", true))->inbox.size(), 1u);

    req = step("a", lease, "changed", "v2");
    req.consume.push_back(delivered.id);
    ASSERT_TRUE(sync(s.commit(std::move(req))).has_value());
    EXPECT_EQ(sync(s.load("a", true))->inbox.size(), 0u);
    EXPECT_EQ(stored(), "v2");
}

TEST_F(document_commits, a_stale_lease_writes_no_document) {
    server.cli({"SET", "keel:{order:o-1}:doc", "v1"});
    auto lease = start("a");
    lease.epoch += 1;
    auto r = sync(s.commit(step("a", lease, "v1", "v2")));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), store_error::fenced);
    EXPECT_EQ(stored(), "v1");
}

// A fan-out (an emit) carries documents the same way: checked before anything else, the
// emit's memo included, and written with the deliveries, or nothing happens.
struct document_fan_outs : document_commits {
    // A running instance subscribed to "/go".
    void start_subscribed(const std::string& id) {
        start_request req{id, "/def", nlohmann::json::array(), "w1", now, 30s};
        req.subscriptions = {"/go"};
        ASSERT_TRUE(sync(s.start(std::move(req))).created);
    }
    fan_out_request emit(std::string key, std::optional<std::string> expected, std::string text) {
        fan_out_request req;
        req.subscriptions = {"/go"};
        req.signal = inbox_entry{0, std::move(key), "/go", nlohmann::json(1), now};
        auto where = docs.address("order", "o-1").value();
        req.documents.push_back(
            document_write{where.key, where.lock, std::move(expected), std::move(text)});
        return req;
    }
    std::size_t inbox_size(const std::string& id) { return sync(s.load(id, true))->inbox.size(); }
};

TEST_F(document_fan_outs, a_document_as_expected_is_written_with_the_deliveries) {
    start_subscribed("a");
    server.cli({"SET", "keel:{order:o-1}:doc", "v1"});
    auto out = sync(s.fan_out(emit("k1", "v1", "v2")));
    EXPECT_FALSE(out.documents_changed);
    EXPECT_EQ(out.reached, 1u);
    EXPECT_EQ(stored(), "v2");
    EXPECT_EQ(inbox_size("a"), 1u);

    // One expected absent must be absent.
    server.cli({"DEL", "keel:{order:o-1}:doc"});
    out = sync(s.fan_out(emit("k2", std::nullopt, "new")));
    EXPECT_FALSE(out.documents_changed);
    EXPECT_EQ(stored(), "new");
    EXPECT_EQ(inbox_size("a"), 2u);
}

TEST_F(document_fan_outs, a_changed_or_locked_document_delivers_nothing_and_keeps_no_memo) {
    start_subscribed("a");
    server.cli({"SET", "keel:{order:o-1}:doc", "changed"});
    auto out = sync(s.fan_out(emit("k", "v1", "v2")));
    EXPECT_TRUE(out.documents_changed);
    EXPECT_EQ(out.reached, 0u);
    EXPECT_TRUE(out.delivered.empty());
    EXPECT_EQ(stored(), "changed");
    EXPECT_EQ(inbox_size("a"), 0u);

    server.cli({"SET", "keel:{order:o-1}:lock", "7"});
    out = sync(s.fan_out(emit("k", "changed", "v2")));
    EXPECT_TRUE(out.documents_changed);
    EXPECT_EQ(stored(), "changed");
    EXPECT_EQ(inbox_size("a"), 0u);
    server.cli({"DEL", "keel:{order:o-1}:lock"});

    // The refused emits left no memo: the same key delivers now.
    out = sync(s.fan_out(emit("k", "changed", "v2")));
    EXPECT_FALSE(out.documents_changed);
    EXPECT_FALSE(out.duplicate);
    EXPECT_EQ(stored(), "v2");
    EXPECT_EQ(inbox_size("a"), 1u);
}

TEST_F(document_fan_outs, a_check_only_document_delivers_when_as_read_and_writes_nothing) {
    start_subscribed("a");
    // A TTL on the document shows that it was not written: a SET would clear it.
    server.cli({"SET", "keel:{order:o-1}:doc", "v1", "EX", "1000"});
    auto out = sync(s.fan_out(emit("k1", "v1", "v1")));
    EXPECT_FALSE(out.documents_changed);
    EXPECT_EQ(out.reached, 1u);
    EXPECT_EQ(stored(), "v1");
    EXPECT_NE(server.cli({"TTL", "keel:{order:o-1}:doc"}), "-1");
    EXPECT_EQ(inbox_size("a"), 1u);

    // Checked all the same: a document that is no longer as read delivers nothing.
    server.cli({"SET", "keel:{order:o-1}:doc", "v2"});
    out = sync(s.fan_out(emit("k2", "v1", "v1")));
    EXPECT_TRUE(out.documents_changed);
    EXPECT_EQ(stored(), "v2");
    EXPECT_EQ(inbox_size("a"), 1u);
}

TEST_F(document_fan_outs, a_repeated_emit_still_writes_a_change_it_carries) {
    start_subscribed("a");
    server.cli({"SET", "keel:{order:o-1}:doc", "v1"});
    ASSERT_FALSE(sync(s.fan_out(emit("k", "v1", "v2"))).duplicate);
    auto out = sync(s.fan_out(emit("k", "v2", "v3")));
    EXPECT_TRUE(out.duplicate);
    EXPECT_EQ(out.reached, 1u);
    EXPECT_EQ(stored(), "v3");
    EXPECT_EQ(inbox_size("a"), 1u);
}

// A start carries documents the same way: checked first, written also when the instance
// exists (which the start leaves as it is), or nothing happens.
start_request start_writing(const std::string& id, redis_documents& docs,
                            std::optional<std::string> expected, std::string text, time_point now) {
    start_request req{id, "/def", nlohmann::json::array(), "w1", now, 30s};
    auto where = docs.address("order", "o-1").value();
    req.documents.push_back(
        document_write{where.key, where.lock, std::move(expected), std::move(text)});
    return req;
}

TEST_F(document_commits, a_start_writes_its_document_or_nothing) {
    auto r = sync(s.start(start_writing("a", docs, std::nullopt, "v1", now)));
    EXPECT_TRUE(r.created);
    EXPECT_FALSE(r.documents_changed);
    EXPECT_EQ(stored(), "v1");

    // Expected absent, but there is one: no document, no instance.
    r = sync(s.start(start_writing("b", docs, std::nullopt, "v2", now)));
    EXPECT_TRUE(r.documents_changed);
    EXPECT_FALSE(r.created);
    EXPECT_EQ(stored(), "v1");
    EXPECT_FALSE(sync(s.load("b", false)).has_value());

    // Locked: the same.
    server.cli({"SET", "keel:{order:o-1}:lock", "7"});
    r = sync(s.start(start_writing("b", docs, "v1", "v2", now)));
    EXPECT_TRUE(r.documents_changed);
    EXPECT_EQ(stored(), "v1");
    EXPECT_FALSE(sync(s.load("b", false)).has_value());
    server.cli({"DEL", "keel:{order:o-1}:lock"});

    // An instance that exists is left as it is; its document is still written.
    r = sync(s.start(start_writing("a", docs, "v1", "v2", now)));
    EXPECT_FALSE(r.created);
    EXPECT_FALSE(r.documents_changed);
    EXPECT_EQ(stored(), "v2");
}

TEST_F(document_commits, a_store_that_cannot_write_documents_refuses_a_start_with_some) {
    memory_store memory;
    EXPECT_THROW((void)sync(memory.start(start_writing("a", docs, std::nullopt, "v1", now))),
                 std::logic_error);
    EXPECT_FALSE(sync(memory.load("a", false)).has_value());
}

TEST_F(document_fan_outs, a_store_that_cannot_write_documents_refuses_a_fan_out_with_some) {
    memory_store memory;
    EXPECT_THROW((void)sync(memory.fan_out(emit("k", std::nullopt, "v1"))), std::logic_error);
}

}  // namespace
}  // namespace keel::process
