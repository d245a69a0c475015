// The keel command line end to end in-process: run_cli against a stand-in for the admin
// API (fake_admin.hpp) that records what it receives. Covers the token, ids that need
// encoding, paging, every command's request and output, exit codes for refusals, missing
// or slow services and bad usage, and the environment variables.

#include "cli.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "encoding.hpp"
#include "fake_admin.hpp"
#include "run_cli.hpp"

namespace keel::cli {
namespace {

using json = nlohmann::json;
using testing::fake_admin;
using testing::recorded_request;

using testing::cli_result;
using testing::contains;
using testing::run;

std::size_t line_count(const std::string& text) {
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

std::string path_of(const recorded_request& r) {
    return r.target.substr(0, r.target.find('?'));
}

// Sets or unsets an environment variable for one test and puts the old value back.
class scoped_env {
  public:
    scoped_env(const char* name, std::optional<std::string> value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value)
            ::setenv(name, value->c_str(), 1);
        else
            ::unsetenv(name);
    }
    ~scoped_env() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

  private:
    const char* name_;
    std::optional<std::string> old_;
};

// A URL where nothing listens: the port of a server that has shut down.
std::string dead_url() {
    http::router router;
    std::uint16_t port = 0;
    {
        http::testing::test_server server(router);
        port = server.port();
    }
    return "http://127.0.0.1:" + std::to_string(port);
}

class keel_cli : public ::testing::Test {
  protected:
    // Runs keel with the fake's --url and --token in front of `args`.
    cli_result admin(std::vector<std::string> args) {
        args.insert(args.begin(), {"--url", fake.url(), "--token", std::string(fake_admin::token)});
        return run(std::move(args));
    }
    recorded_request only_request() {
        auto requests = fake.requests();
        EXPECT_EQ(requests.size(), 1u);
        return requests.empty() ? recorded_request{} : requests.back();
    }

    scoped_env no_url_{"KEEL_ADMIN_URL", std::nullopt};
    scoped_env no_token_{"KEEL_ADMIN_TOKEN", std::nullopt};
    fake_admin fake;
};

TEST_F(keel_cli, sends_the_token_as_a_bearer_header) {
    auto r = admin({"stats"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto req = only_request();
    EXPECT_EQ(req.method, "GET");
    EXPECT_EQ(req.target, "/admin/stats");
    EXPECT_EQ(req.authorization, "Bearer s3cret");
}

TEST_F(keel_cli, a_wrong_token_exits_1_with_a_hint) {
    auto r = run({"--url", fake.url(), "--token", "nope", "stats"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "401")) << r.err;
    EXPECT_TRUE(contains(r.err, "a valid admin token is required")) << r.err;
    EXPECT_TRUE(contains(r.err, "--token")) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(only_request().authorization, "Bearer nope");
}

TEST_F(keel_cli, no_token_sends_no_authorization_header) {
    auto r = run({"--url", fake.url(), "stats"});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(only_request().authorization, "");
}

TEST_F(keel_cli, ids_with_slashes_and_odd_characters_reach_the_server_intact) {
    const std::string id = "fulfil/o 17?x#y%z&a=b+ü";
    const std::string encoded = "fulfil/o%2017%3Fx%23y%25z%26a%3Db%2B%C3%BC";
    struct use {
        std::vector<std::string> args;
        std::string method;
        std::string prefix;
    };
    std::vector<use> uses{
        {{"show", id}, "GET", "/admin/instances/"},
        {{"journal", id}, "GET", "/admin/journal/"},
        {{"cancel", id}, "POST", "/admin/cancel/"},
        {{"resume", id}, "POST", "/admin/resume/"},
        {{"retry", id, "--from", "2"}, "POST", "/admin/retry/"},
        {{"signal", "/payment/o-17/received", "--instance", id}, "POST", "/admin/signal/"},
    };
    for (const auto& u : uses) {
        auto r = admin(u.args);
        EXPECT_EQ(r.code, 0) << u.prefix << ": " << r.err;
        auto req = fake.requests().back();
        EXPECT_EQ(req.method, u.method);
        EXPECT_EQ(path_of(req), u.prefix + encoded);
        EXPECT_EQ(req.param, id) << u.prefix;
    }
}

TEST_F(keel_cli, show_prints_the_instance_or_its_json) {
    auto r = admin({"show", "fulfil/o-17"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "id:         fulfil/o-17\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "status:     suspended\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "waits (1):\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "/payment/o-17/received")) << r.out;

    r = admin({"show", "fulfil/o-17", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto doc = json::parse(r.out);
    EXPECT_EQ(doc["id"], "fulfil/o-17");
    EXPECT_EQ(doc["journal_length"], 5);
    EXPECT_TRUE(contains(r.out, "\n  \"definition\": \"order_fulfillment\"")) << "pretty-printed";
}

TEST_F(keel_cli, show_prints_the_parent_published_values_and_children) {
    auto r = admin({"show", "fulfil/o-17"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "parent:     billing/s-1\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "published (1):\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "{\"invoice\":3,\"of\":12}")) << r.out;
    EXPECT_TRUE(contains(r.out, "children (1):\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "invoice/s-1/3")) << r.out;
    EXPECT_TRUE(contains(r.out, "completed")) << r.out;
}

TEST_F(keel_cli, queues_prints_each_queue_and_one_with_its_partitions) {
    auto r = admin({"queues"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fake.requests().back().target, "/admin/queues");
    EXPECT_TRUE(r.out.starts_with("NAME")) << r.out;
    EXPECT_TRUE(contains(r.out, "invoicing")) << r.out;
    EXPECT_TRUE(contains(r.out, "20/1000ms")) << r.out;
    EXPECT_TRUE(contains(r.out, "PER WORKER")) << r.out;
    r = admin({"queues", "invoicing"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fake.requests().back().target, "/admin/queues/invoicing");
    EXPECT_TRUE(contains(r.out, "PARTITION")) << r.out;
    EXPECT_TRUE(contains(r.out, "acme")) << r.out;
    EXPECT_TRUE(contains(r.out, "(default)")) << r.out;
    r = admin({"queues", "nope"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "no queue nope")) << r.err;
}

TEST_F(keel_cli, schedules_prints_a_row_per_schedule_and_acts_on_one) {
    auto r = admin({"schedules"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fake.requests().back().target, "/admin/schedules");
    EXPECT_TRUE(r.out.starts_with("NAME")) << r.out;
    EXPECT_TRUE(contains(r.out, "dunning-eu")) << r.out;
    EXPECT_TRUE(contains(r.out, "Europe/Berlin")) << r.out;
    EXPECT_TRUE(contains(r.out, "active")) << r.out;
    r = admin({"schedule", "pause", "dunning-eu"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fake.requests().back().target, "/admin/schedules/dunning-eu/pause");
    EXPECT_EQ(r.out, "dunning-eu: paused\n");
    r = admin({"schedule", "trigger", "nope"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "no schedule nope")) << r.err;
    r = admin({"schedule", "explode", "dunning-eu"});
    EXPECT_NE(r.code, 0);
    r = admin({"schedule", "backfill", "dunning-eu", "--from", "2026-11-01T00:00:00Z", "--to",
               "2026-11-03T00:00:00Z"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fake.requests().back().target, "/admin/schedules/dunning-eu/backfill");
    EXPECT_EQ(nlohmann::json::parse(fake.requests().back().body),
              (nlohmann::json{{"from", "2026-11-01T00:00:00Z"}, {"to", "2026-11-03T00:00:00Z"}}));
    EXPECT_EQ(r.out, "dunning-eu: backfilled from 2026-11-01T00:00:00Z to 2026-11-03T00:00:00Z\n");
    auto before = fake.requests().size();
    r = admin({"schedule", "backfill", "dunning-eu", "--from", "2026-11-01T00:00:00Z"});
    EXPECT_EQ(r.code, 2) << "a usage error";
    EXPECT_TRUE(contains(r.err, "--from and --to")) << r.err;
    r = admin({"schedule", "pause", "dunning-eu", "--to", "2026-11-01T00:00:00Z"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(fake.requests().size(), before) << "nothing sent";
}

TEST_F(keel_cli, an_unknown_instance_exits_1_with_the_detail) {
    auto r = admin({"show", "missing"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "404")) << r.err;
    EXPECT_TRUE(contains(r.err, "no instance missing")) << r.err;
    EXPECT_EQ(r.out, "");
}

TEST_F(keel_cli, ps_prints_one_page_and_how_to_get_the_next) {
    auto r = admin({"ps", "--limit", "2"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "fulfil/o-5")) << r.out;
    EXPECT_TRUE(contains(r.out, "fulfil/o-4")) << r.out;
    EXPECT_FALSE(contains(r.out, "fulfil/o-3")) << r.out;
    auto req = only_request();
    EXPECT_EQ(req.query_value("limit"), "2");
    EXPECT_EQ(req.query_value("cursor"), "");
    auto cursors = fake.issued_cursors();
    ASSERT_EQ(cursors.size(), 1u);
    auto hint = "more: add --cursor " + shell_quote(cursors[0]) + " for the next page, or --all\n";
    EXPECT_TRUE(r.out.ends_with(hint)) << r.out;
}

TEST_F(keel_cli, ps_cursor_continues_where_the_hint_said) {
    ASSERT_EQ(admin({"ps", "--limit", "2"}).code, 0);
    auto cursor = fake.issued_cursors().at(0);
    auto r = admin({"ps", "--limit", "2", "--cursor", cursor});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fake.requests().back().query_value("cursor"), cursor) << "the cursor arrives intact";
    EXPECT_TRUE(contains(r.out, "fulfil/o-3")) << r.out;
    EXPECT_TRUE(contains(r.out, "fulfil/o-2")) << r.out;
    EXPECT_FALSE(contains(r.out, "fulfil/o-5")) << r.out;
}

TEST_F(keel_cli, ps_all_follows_the_cursors_to_the_last_page) {
    auto r = admin({"ps", "--all", "--limit", "2"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto requests = fake.requests();
    auto cursors = fake.issued_cursors();
    ASSERT_EQ(requests.size(), 3u);
    ASSERT_EQ(cursors.size(), 2u);
    EXPECT_EQ(requests[0].query_value("cursor"), "");
    EXPECT_EQ(requests[1].query_value("cursor"), cursors[0]);
    EXPECT_EQ(requests[2].query_value("cursor"), cursors[1]);
    for (int n = 1; n <= fake_admin::instance_count; ++n)
        EXPECT_TRUE(contains(r.out, "fulfil/o-" + std::to_string(n) + " ")) << r.out;
    EXPECT_EQ(line_count(r.out), 1u + fake_admin::instance_count) << "a header and one table";
    EXPECT_FALSE(contains(r.out, "more:"));
}

TEST_F(keel_cli, ps_all_json_merges_every_page) {
    auto r = admin({"ps", "--all", "--limit", "2", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto doc = json::parse(r.out);
    ASSERT_EQ(doc.size(), 1u);
    ASSERT_EQ(doc["instances"].size(), 5u);
    for (int i = 0; i < 5; ++i)
        EXPECT_EQ(doc["instances"][i]["id"], "fulfil/o-" + std::to_string(5 - i));
}

TEST_F(keel_cli, ps_json_prints_the_page_as_the_api_answered) {
    auto r = admin({"ps", "--limit", "2", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto doc = json::parse(r.out);
    EXPECT_EQ(doc["instances"].size(), 2u);
    EXPECT_EQ(doc["next"], fake.issued_cursors().at(0));
}

TEST_F(keel_cli, ps_passes_its_filters_through_encoded) {
    auto r = admin({"ps", "--definition", "order_fulfillment", "--status", "suspended", "--prefix",
                    "fulfil/o 1", "--since", "1h", "--until", "2026-11-23T10:00:00+01:00"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto req = only_request();
    EXPECT_EQ(req.query_value("definition"), "order_fulfillment");
    EXPECT_EQ(req.query_value("status"), "suspended");
    EXPECT_EQ(req.query_value("prefix"), "fulfil/o 1");
    EXPECT_EQ(req.query_value("since"), "1h");
    EXPECT_EQ(req.query_value("until"), "2026-11-23T10:00:00+01:00");
    EXPECT_EQ(req.query_value("limit"), "50");
    EXPECT_TRUE(contains(req.target, "&prefix=fulfil/o%201&")) << req.target;
    EXPECT_TRUE(contains(req.target, "&until=2026-11-23T10%3A00%3A00%2B01%3A00")) << req.target;
}

TEST_F(keel_cli, journal_pages_through_the_whole_journal) {
    auto r = admin({"journal", "fulfil/o-17", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto requests = fake.requests();
    ASSERT_EQ(requests.size(), 3u) << "90 entries, served 40 at a time";
    EXPECT_EQ(requests[0].query_value("offset"), "0");
    EXPECT_EQ(requests[1].query_value("offset"), "40");
    EXPECT_EQ(requests[2].query_value("offset"), "80");
    EXPECT_EQ(requests[0].query_value("retry"), "");
    auto doc = json::parse(r.out);
    ASSERT_EQ(doc["entries"].size(), 90u);
    for (int p = 0; p < 90; ++p) EXPECT_EQ(doc["entries"][p]["position"], p);
    EXPECT_EQ(doc["total"], 90);

    r = admin({"journal", "fulfil/o-17"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(line_count(r.out), 91u) << "a header and every entry";
    EXPECT_TRUE(r.out.starts_with("POS  SEQ  KIND  NAME")) << r.out;
    EXPECT_TRUE(contains(r.out, "step 89")) << r.out;
}

TEST_F(keel_cli, journal_retry_asks_for_the_journal_before_that_retry) {
    auto r = admin({"journal", "fulfil/o-17", "--retry", "2"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fake.requests().front().query_value("retry"), "2");
}

TEST_F(keel_cli, cancel_prints_the_new_status) {
    auto r = admin({"cancel", "fulfil/o-17"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "fulfil/o-17: cancelled\n");
    EXPECT_EQ(only_request().body, "");
}

TEST_F(keel_cli, a_409_refusal_exits_1_with_the_detail_on_stderr) {
    auto r = admin({"cancel", "done/o-9"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "409")) << r.err;
    EXPECT_TRUE(contains(r.err, "instance done/o-9 is completed")) << r.err;
    EXPECT_EQ(r.out, "");
}

TEST_F(keel_cli, resume_posts_to_the_instance) {
    auto r = admin({"resume", "fulfil/o-17"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "fulfil/o-17: running\n");
    EXPECT_EQ(path_of(only_request()), "/admin/resume/fulfil/o-17");
}

TEST_F(keel_cli, resume_parked_posts_the_definition_and_lists_what_was_resumed) {
    auto r = admin({"resume", "--parked", "--definition", "order_fulfillment"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto req = only_request();
    EXPECT_EQ(req.target, "/admin/resume-parked");
    EXPECT_EQ(json::parse(req.body), json({{"definition", "order_fulfillment"}}));
    EXPECT_EQ(req.content_type, "application/json");
    EXPECT_TRUE(contains(r.out, "resumed 2 instances:\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "  order_fulfillment/1\n  order_fulfillment/2\n")) << r.out;
}

TEST_F(keel_cli, resume_parked_exits_1_when_an_instance_was_refused) {
    auto r = admin({"resume", "--parked", "--definition", "mixed"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.out, "m/1")) << r.out;
    EXPECT_TRUE(contains(r.err, "refused m/2: owned by worker w-2")) << r.err;
}

TEST_F(keel_cli, retry_posts_the_entry_to_run_again_from) {
    auto r = admin({"retry", "fulfil/o-17", "--from", "3"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto req = only_request();
    EXPECT_EQ(json::parse(req.body), json({{"from", 3}}));
    EXPECT_EQ(r.out, "fulfil/o-17: running again from journal entry 3\n");

    r = admin({"retry", "fulfil/o-17", "--from", "9"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "400 Bad Request: from 9 is past the journal")) << r.err;
}

TEST_F(keel_cli, retry_without_names_the_consumed_signals_not_to_give_back) {
    auto r = admin({"retry", "fulfil/o-17", "--from", "0", "--without", "4", "--without", "7"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(only_request().body), json({{"from", 0}, {"without", {4, 7}}}));
    EXPECT_EQ(r.out,
              "fulfil/o-17: running again from journal entry 0, without inbox entries 4, 7\n");
}

TEST_F(keel_cli, remove_signal_posts_the_inbox_id) {
    auto r = admin({"remove-signal", "fulfil/o-17", "5"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto req = only_request();
    EXPECT_EQ(req.method, "POST");
    EXPECT_EQ(req.param, "fulfil/o-17");
    EXPECT_EQ(json::parse(req.body), json({{"inbox", 5}}));
    EXPECT_EQ(r.out, "fulfil/o-17: removed inbox entry 5 /payment/o-17/received\n");

    r = admin({"remove-signal", "fulfil/o-17", "6"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "has no inbox entry 6")) << r.err;
    EXPECT_EQ(admin({"remove-signal", "fulfil/o-17"}).code, 2);
}

TEST_F(keel_cli, signal_emits_by_path_with_the_key_as_idempotency_key) {
    auto r = admin(
        {"signal", "/payment/o-17/received", "--payload", R"({"amount": 10})", "--key", "tx-1"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto req = only_request();
    EXPECT_EQ(req.method, "POST");
    EXPECT_EQ(req.target, "/admin/signals/payment/o-17/received");
    EXPECT_EQ(req.idempotency_key, "tx-1");
    EXPECT_EQ(req.content_type, "application/json");
    EXPECT_EQ(json::parse(req.body), json({{"amount", 10}}));
    EXPECT_EQ(r.out, "delivered to 2 instances\n");
}

TEST_F(keel_cli, signal_without_payload_or_key_sends_neither) {
    auto r = admin({"signal", "/payment/o-17/failed"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto req = only_request();
    EXPECT_EQ(req.body, "");
    EXPECT_EQ(req.idempotency_key, "");
}

TEST_F(keel_cli, signal_reports_a_duplicate_key) {
    auto r = admin({"signal", "/payment/o-17/received", "--key", "seen"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "duplicate")) << r.out;
}

TEST_F(keel_cli, signal_to_one_instance_posts_path_payload_and_key) {
    auto r = admin({"signal", "/shipping/o-17/delivered", "--instance", "fulfil/o-17", "--payload",
                    R"({"carrier": "dhl"})", "--key", "k-1"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto req = only_request();
    EXPECT_EQ(req.target, "/admin/signal/fulfil/o-17");
    EXPECT_EQ(json::parse(req.body), json({{"path", "/shipping/o-17/delivered"},
                                           {"payload", {{"carrier", "dhl"}}},
                                           {"key", "k-1"}}));
    EXPECT_EQ(req.idempotency_key, "") << "the key travels in the body";
    EXPECT_EQ(r.out, "fulfil/o-17: stored (the instance was waiting for it)\n");
}

TEST_F(keel_cli, an_unknown_signal_exits_1) {
    auto r = admin({"signal", "/unknown/x"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "404 Not Found: no signal matches /unknown/x")) << r.err;
}

TEST_F(keel_cli, stats_prints_a_table_with_a_total_row_or_the_json) {
    auto r = admin({"stats"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(r.out.starts_with("DEFINITION         RUNNING  SUSPENDED")) << r.out;
    EXPECT_TRUE(contains(
        r.out, "\norder_fulfillment        1          2       1       0       0          3"))
        << r.out;
    EXPECT_TRUE(contains(r.out, "\ntotal                    1          2")) << r.out;

    r = admin({"stats", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["total"]["completed"], 3);
}

TEST_F(keel_cli, workers_prints_a_row_per_worker_and_definition_or_the_json) {
    auto r = admin({"workers"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fake.requests().back().target, "/admin/workers");
    EXPECT_TRUE(r.out.starts_with("WORKER       DEFINITION         VERSION")) << r.out;
    EXPECT_TRUE(contains(r.out, "\norders-7f9c  order_fulfillment  2026-11.2")) << r.out;
    EXPECT_TRUE(contains(r.out, "\norders-7f9c  email")) << r.out;

    r = admin({"workers", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["workers"][0]["worker"], "orders-7f9c");
}

TEST_F(keel_cli, a_missing_server_exits_1_naming_the_url) {
    auto url = dead_url();
    auto r = run({"--url", url, "--token", "s3cret", "stats"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "cannot connect to " + url)) << r.err;
    EXPECT_EQ(r.out, "");
}

TEST_F(keel_cli, a_service_that_does_not_answer_in_time_exits_1) {
    http::router slow;
    slow.get("/admin/stats", [](http::request&) -> asio::awaitable<http::response> {
        std::this_thread::sleep_for(std::chrono::milliseconds(800));
        co_return http::response::json({});
    });
    http::testing::test_server server(slow);
    auto url = "http://127.0.0.1:" + std::to_string(server.port());
    auto started = std::chrono::steady_clock::now();
    auto r = run({"--url", url, "--timeout", "0.2", "stats"});
    auto took = std::chrono::steady_clock::now() - started;
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "no answer from " + url + " within 0.2s")) << r.err;
    EXPECT_LT(took, std::chrono::milliseconds(700));
}

TEST_F(keel_cli, bad_usage_exits_2_before_any_request) {
    const std::vector<std::vector<std::string>> usages{
        {},
        {"bogus"},
        {"ps", "--status", "sleeping"},
        {"ps", "--limit", "0"},
        {"ps", "--limit", "1001"},
        {"ps", "--bogus"},
        {"ps", "extra"},
        {"show"},
        {"show", ""},
        {"journal", "x", "--retry", "0"},
        {"cancel"},
        {"retry", "x"},
        {"retry", "x", "--from", "-1"},
        {"retry", "x", "--from", "two"},
        {"resume"},
        {"resume", "--parked"},
        {"resume", "a/1", "--parked", "--definition", "d"},
        {"resume", "a/1", "--definition", "d"},
        {"signal"},
        {"signal", "no-slash"},
        {"signal", "/a", "--payload", "{not json"},
        {"signal", "/a", "--key", "bad\nkey"},
        {"stats", "--timeout", "0"},
    };
    for (const auto& args : usages) {
        auto r = admin(args);
        std::string shown;
        for (const auto& a : args) shown += a + " ";
        EXPECT_EQ(r.code, 2) << shown << "\n" << r.err;
        EXPECT_FALSE(r.err.empty()) << shown;
    }
    EXPECT_TRUE(fake.requests().empty());
}

TEST_F(keel_cli, an_unusable_url_is_bad_usage) {
    for (std::string url : {"https://127.0.0.1:8443", "ftp://x", "127.0.0.1:8080"}) {
        auto r = run({"--url", url, "stats"});
        EXPECT_EQ(r.code, 2) << url;
        EXPECT_TRUE(contains(r.err, url)) << r.err;
    }
    EXPECT_TRUE(contains(run({"--url", "https://x", "stats"}).err, "https:// is not supported"));
}

TEST_F(keel_cli, help_exits_0) {
    auto r = run({"--help"});
    EXPECT_EQ(r.code, 0);
    EXPECT_TRUE(contains(r.out, "KEEL_ADMIN_URL")) << r.out;
    r = run({"ps", "--help"});
    EXPECT_EQ(r.code, 0);
    EXPECT_TRUE(contains(r.out, "--cursor")) << r.out;
}

TEST_F(keel_cli, the_environment_gives_url_and_token) {
    scoped_env url("KEEL_ADMIN_URL", fake.url());
    scoped_env token("KEEL_ADMIN_TOKEN", std::string(fake_admin::token));
    auto r = run({"stats"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(only_request().authorization, "Bearer s3cret");
}

TEST_F(keel_cli, flags_win_over_the_environment) {
    scoped_env url("KEEL_ADMIN_URL", dead_url());
    scoped_env token("KEEL_ADMIN_TOKEN", "wrong");
    auto r = run({"--url", fake.url(), "--token", "s3cret", "stats"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(only_request().authorization, "Bearer s3cret");

    r = run({"--url", fake.url(), "stats"});
    EXPECT_EQ(r.code, 1) << "the environment's token is used when no flag is given";
    EXPECT_EQ(fake.requests().back().authorization, "Bearer wrong");
}

TEST_F(keel_cli, global_options_may_follow_the_command_and_the_url_may_end_in_a_slash) {
    auto r = run({"stats", "--url", fake.url() + "/", "--token", "s3cret"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(only_request().target, "/admin/stats");
}

TEST_F(keel_cli, ps_all_with_pages_of_one_fetches_every_instance) {
    auto r = admin({"ps", "--all", "--limit", "1"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fake.requests().size(), 5u);
}

}  // namespace
}  // namespace keel::cli
