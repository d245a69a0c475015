// The API's answers as text: the instance list, one instance with its sections, a journal
// and the statistics, all within 100 columns and with times relative to a fixed now.

#include "views.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "format.hpp"

namespace keel::cli {
namespace {

using json = nlohmann::json;

const time_point now = *parse_time("2026-11-23T10:00:00.000Z");

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

void expect_within_100_columns(const std::string& text) {
    for (const auto& line : lines_of(text)) EXPECT_LE(display_width(line), 100u) << line;
}

bool contains(const std::string& text, std::string_view part) {
    return text.find(part) != std::string::npos;
}

json instance(std::string id) {
    return {{"id", std::move(id)},
            {"definition", "order_fulfillment"},
            {"status", "suspended"},
            {"created", "2026-11-23T09:57:00.000Z"},
            {"changed", "2026-11-23T07:00:00.000Z"}};
}

TEST(render_instances, shows_a_header_and_a_row_per_instance_with_relative_times) {
    auto text =
        render_instances(json::array({instance("fulfil/o-17"), instance("fulfil/o-16")}), now);
    auto lines = lines_of(text);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0], "ID           DEFINITION         STATUS     CREATED  CHANGED");
    EXPECT_EQ(lines[1], "fulfil/o-17  order_fulfillment  suspended  3m ago   3h ago");
}

TEST(render_instances, truncates_long_ids_in_the_middle_to_fit_100_columns) {
    auto long_id = "fulfil/" + std::string(150, 'x') + "/o-17";
    auto text = render_instances(json::array({instance(long_id)}), now);
    expect_within_100_columns(text);
    EXPECT_TRUE(contains(text, "fulfil/x"));
    EXPECT_TRUE(contains(text, "…"));
    EXPECT_TRUE(contains(text, "x/o-17"));
    EXPECT_TRUE(contains(text, "suspended"));
}

TEST(render_instances, says_so_when_there_are_none) {
    EXPECT_EQ(render_instances(json::array(), now), "no instances\n");
}

TEST(render_more_hint, names_the_cursor_ready_to_paste) {
    EXPECT_EQ(render_more_hint("abc123"),
              "more: add --cursor abc123 for the next page, or --all\n");
    EXPECT_TRUE(contains(render_more_hint("a b&c"), "--cursor 'a b&c'"));
}

json detailed_instance() {
    auto i = instance("fulfil/o-17");
    i["params"] = {"o-17"};
    i["version"] = "2026-11.2";
    i["reason"] = nullptr;
    i["result"] = nullptr;
    i["error"] = nullptr;
    i["lease"] = {{"worker", "w-1"}, {"epoch", 3}, {"expires", "2026-11-23T10:00:20.000Z"}};
    i["waits"] = {{{"seq", 2}, {"path", "/payment/o-17/received"}}};
    i["timers"] = {{{"seq", 3}, {"name", "payment timeout"}, {"due", "2026-11-26T10:00:00.000Z"}}};
    i["inbox"] = {{{"id", 4},
                   {"path", "/shipping/o-17/delivered"},
                   {"key", "k-1"},
                   {"payload", {{"carrier", std::string(200, 'c')}}},
                   {"at", "2026-11-23T09:59:00.000Z"}}};
    i["journal_length"] = 5;
    i["steps"] = {{{"seq", 6}, {"name", "charge"}, {"attempt", 3}, {"last_error", "timeout"}}};
    i["retries"] = {{{"from", 3}, {"at", "2026-11-22T10:00:00.000Z"}, {"journal_length", 7}}};
    return i;
}

TEST(render_instance, shows_a_key_value_block_and_every_section) {
    auto text = render_instance(detailed_instance(), now);
    expect_within_100_columns(text);
    auto lines = lines_of(text);
    ASSERT_GE(lines.size(), 10u);
    EXPECT_EQ(lines[0], "id:         fulfil/o-17");
    EXPECT_TRUE(contains(text, "status:     suspended\n"));
    EXPECT_TRUE(contains(text, "version:    2026-11.2\n"));
    EXPECT_TRUE(contains(text, "params:     [\"o-17\"]\n"));
    EXPECT_TRUE(contains(text, "created:    2026-11-23T09:57:00.000Z (3m ago)\n"));
    EXPECT_TRUE(contains(text, "lease:      worker w-1, epoch 3, expires in 20s\n"));
    EXPECT_TRUE(contains(text, "journal:    5 entries\n"));
    EXPECT_FALSE(contains(text, "reason:")) << "null fields are left out";
    EXPECT_TRUE(contains(text, "waits (1):\n  SEQ  PATH\n    2  /payment/o-17/received\n"));
    EXPECT_TRUE(contains(text, "timers (1):"));
    EXPECT_TRUE(contains(text, "payment timeout  2026-11-26T10:00:00.000Z (in 3d)"));
    EXPECT_TRUE(contains(text, "inbox (1):"));
    EXPECT_TRUE(contains(text, "/shipping/o-17/delivered"));
    EXPECT_TRUE(contains(text, "{\"carrier\":\"ccc"));
    EXPECT_TRUE(contains(text, "retries (1):"));
    EXPECT_TRUE(contains(text, "keel journal fulfil/o-17 --retry N"));
    EXPECT_TRUE(contains(text, "steps in flight (1):")) << text;
    EXPECT_TRUE(contains(text, "charge")) << text;
    EXPECT_TRUE(contains(text, "timeout")) << text;
}

TEST(render_instance, leaves_out_the_version_of_an_unversioned_instance) {
    auto i = detailed_instance();
    i["version"] = nullptr;
    EXPECT_FALSE(contains(render_instance(i, now), "version:"));
}

TEST(render_instance, says_which_worker_gave_the_instance_back_and_why) {
    auto i = detailed_instance();
    EXPECT_FALSE(contains(render_instance(i, now), "left:"));
    i["left"] = {{"worker", "orders-7f9c"},
                 {"version", "1"},
                 {"reason", "journal mismatch at #4; worker orders-b31a runs version \"2\""},
                 {"at", "2026-11-23T09:55:00.000Z"}};
    EXPECT_TRUE(contains(render_instance(i, now),
                         "left:       by worker orders-7f9c (version \"1\") 5m ago: journal "
                         "mismatch at #4; worker orders-b31a runs version \"2\"\n"))
        << render_instance(i, now);
}

TEST(render_instance, shows_the_reason_of_a_parked_instance_and_empty_sections) {
    auto i = instance("fulfil/o-9");
    i["status"] = "parked";
    i["reason"] = "entry 3: expected run 'charge', found timer";
    i["lease"] = nullptr;
    auto text = render_instance(i, now);
    EXPECT_TRUE(contains(text, "reason:     entry 3: expected run 'charge', found timer\n"));
    EXPECT_TRUE(contains(text, "lease:      none\n"));
    EXPECT_TRUE(contains(text, "waits: none\n"));
    EXPECT_TRUE(contains(text, "timers: none\n"));
    EXPECT_TRUE(contains(text, "inbox: none\n"));
    EXPECT_TRUE(contains(text, "retries: none\n"));
}

TEST(render_journal, shows_a_row_per_entry_with_long_values_cut) {
    auto entries = json::array();
    entries.push_back({{"position", 0},
                       {"seq", 1},
                       {"kind", "run"},
                       {"name", "reserve stock"},
                       {"value", {{"reserved", true}}},
                       {"failed", false},
                       {"at", "2026-11-23T09:59:00.000Z"}});
    entries.push_back({{"position", 1},
                       {"seq", 2},
                       {"kind", "run"},
                       {"name", "charge"},
                       {"value", std::string(300, 'e')},
                       {"failed", true},
                       {"at", "2026-11-23T09:59:30.000Z"}});
    auto text = render_journal(entries, now);
    expect_within_100_columns(text);
    auto lines = lines_of(text);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0].substr(0, 31), "POS  SEQ  KIND  NAME           ");
    EXPECT_TRUE(contains(lines[1], "reserve stock"));
    EXPECT_TRUE(contains(lines[1], "1m ago"));
    EXPECT_TRUE(contains(lines[1], "{\"reserved\":true}"));
    EXPECT_FALSE(contains(lines[1], "yes"));
    EXPECT_TRUE(contains(lines[2], "yes"));
    EXPECT_TRUE(contains(lines[2], "…"));
    EXPECT_EQ(display_width(lines[2]), 100u);
}

TEST(render_journal, says_so_when_empty) {
    EXPECT_EQ(render_journal(json::array(), now), "no journal entries\n");
}

TEST(render_stats, shows_a_column_per_status_and_a_total_row) {
    auto stats = json::parse(R"({
        "definitions": {
            "order_fulfillment": {"running": 0, "suspended": 12, "queued": 5, "parked": 1,
                                  "failed": 0, "completed": 40, "cancelled": 2},
            "email_verification": {"running": 3, "suspended": 0, "queued": 0, "parked": 0,
                                   "failed": 1, "completed": 7, "cancelled": 0}},
        "total": {"running": 3, "suspended": 12, "queued": 5, "parked": 1, "failed": 1,
                  "completed": 47, "cancelled": 2}})");
    auto lines = lines_of(render_stats(stats));
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[0],
              "DEFINITION          RUNNING  SUSPENDED  QUEUED  PARKED  FAILED  COMPLETED"
              "  CANCELLED");
    EXPECT_EQ(lines[1],
              "email_verification        3          0       0       0       1          7"
              "          0");
    EXPECT_EQ(lines[2],
              "order_fulfillment         0         12       5       1       0         40"
              "          2");
    EXPECT_EQ(lines[3],
              "total                     3         12       5       1       1         47"
              "          2");
}

TEST(render_stats, counts_what_is_missing_as_zero) {
    auto lines = lines_of(render_stats(json::parse(R"({"definitions": {}, "total": {}})")));
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[1],
              "total             0          0       0       0       0          0          0");
}

TEST(render_workers, shows_a_row_per_worker_and_definition) {
    auto workers = json::array({{{"worker", "orders-7f9c"},
                                 {"versions", {{"order_fulfillment", "2026-11.2"}}},
                                 {"seen", "2026-11-23T09:59:58.000Z"}},
                                {{"worker", "orders-b31a"},
                                 {"versions", {{"email", ""}, {"order_fulfillment", "2026-11.3"}}},
                                 {"seen", "2026-11-23T09:59:56.000Z"}}});
    auto text = render_workers(workers, now);
    auto lines = lines_of(text);
    ASSERT_EQ(lines.size(), 4u) << text;
    EXPECT_TRUE(lines[0].starts_with("WORKER")) << text;
    EXPECT_TRUE(lines[1].starts_with("orders-7f9c  order_fulfillment  2026-11.2")) << text;
    EXPECT_TRUE(lines[2].starts_with("orders-b31a  email")) << text;
    EXPECT_TRUE(lines[3].starts_with("orders-b31a  order_fulfillment  2026-11.3")) << text;
    EXPECT_TRUE(contains(lines[1], "2s ago")) << text;
    expect_within_100_columns(text);
    EXPECT_EQ(render_workers(json::array(), now), "no live workers\n");
}

}  // namespace
}  // namespace keel::cli
