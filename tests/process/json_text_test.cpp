// The store's JSON texts written by hand (process/src/json_text.hpp) are the texts nlohmann
// writes for the same values, byte for byte, and the texts read back give what was written,
// in the store's own form or any other: what is stored stays readable both ways.

#include "json_text.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace keel::process {
namespace {

using namespace std::chrono_literals;

// Strings JSON keeps as they are, and strings it escapes (the quote, the backslash, control
// characters, DEL, UTF-8 of two to four bytes).
const std::vector<std::string> strings = {"",
                                          "pay",
                                          "payment/received",
                                          "a \"quoted\" name",
                                          "back\\slash",
                                          "line\nfeed\ttab\rreturn\bback\fform",
                                          std::string("nul\0byte", 8),
                                          "\x01 control",
                                          "unit\x1fseparator",
                                          "del\x7f",
                                          "caf\xc3\xa9",
                                          "\xe2\x82\xac euro",
                                          "\xf0\x9f\x93\xa6 parcel"};

time_point at_ms(std::int64_t ms) {
    return time_point(std::chrono::milliseconds(ms));
}

std::vector<nlohmann::json> values() {
    return {nullptr,
            true,
            42,
            -7,
            18446744073709551615ull,
            2.5,
            "text",
            nlohmann::json::array({1, "two", nullptr}),
            nlohmann::json{{"order", "o-1"}, {"amount", 1250}, {"items", {{{"sku", "a\"b"}}}}}};
}

TEST(json_text, a_journal_entry_is_the_text_nlohmann_writes) {
    int cases = 0;
    for (const auto& name : strings)
        for (const auto& value : values())
            for (bool failed : {false, true})
                for (std::uint32_t attempts : {1u, 3u}) {
                    journal_entry e{.seq = 17,
                                    .kind = op_kind::signal,
                                    .name = name,
                                    .value = value,
                                    .failed = failed};
                    e.attempts = attempts;
                    for (auto [at, started] :
                         {std::pair{time_point{}, time_point{}},
                          std::pair{at_ms(1764000000123), at_ms(1764000000123)},
                          std::pair{at_ms(1764000000123), at_ms(1763999999000)},
                          std::pair{time_point{}, at_ms(5)}}) {
                        e.at = at;
                        e.started = started;
                        EXPECT_EQ(detail::journal_text(e), nlohmann::json(e).dump())
                            << "name " << nlohmann::json(name).dump() << ", value " << value.dump();
                        ++cases;
                    }
                }
    EXPECT_EQ(cases, 13 * 9 * 2 * 2 * 4);
}

TEST(json_text, every_kind_is_written_by_its_name) {
    for (int k = 0; k <= static_cast<int>(op_kind::patch); ++k) {
        journal_entry e{.seq = 0, .kind = static_cast<op_kind>(k), .name = "n"};
        EXPECT_EQ(detail::journal_text(e), nlohmann::json(e).dump());
        EXPECT_EQ(nlohmann::json::parse(detail::journal_text(e)).get<journal_entry>(), e);
    }
}

TEST(json_text, a_wait_set_is_the_text_nlohmann_writes) {
    auto as_nlohmann = [](const std::vector<signal_wait>& waits) {
        auto j = nlohmann::json::array();
        for (const auto& w : waits) j.push_back({{"seq", w.seq}, {"path", w.path}});
        return j.dump();
    };
    std::vector<signal_wait> waits;
    EXPECT_EQ(detail::waits_text(waits), "[]");
    std::uint64_t seq = 0;
    for (const auto& path : strings) {
        waits.push_back({seq, path});
        seq = seq * 1000 + 7;
        EXPECT_EQ(detail::waits_text(waits), as_nlohmann(waits));
    }
}

TEST(json_text, an_inbox_signal_is_the_text_nlohmann_writes) {
    auto as_nlohmann = [](const inbox_entry& s) {
        nlohmann::json j{
            {"path", s.path},
            {"payload", s.payload},
            {"at", std::chrono::floor<std::chrono::milliseconds>(s.at.time_since_epoch()).count()}};
        if (!s.key.empty()) j["key"] = s.key;
        if (!s.trace.empty()) j["trace"] = s.trace;
        return j.dump();
    };
    for (const auto& text : strings)
        for (const auto& payload : values())
            for (auto at :
                 {time_point{}, at_ms(1764000000123), time_point(1500us), time_point(-1500us)}) {
                inbox_entry with_key{
                    .id = 3, .key = text, .path = "paid/" + text, .payload = payload, .at = at};
                EXPECT_EQ(detail::signal_text(with_key), as_nlohmann(with_key));
                inbox_entry plain = with_key;
                plain.key.clear();
                EXPECT_EQ(detail::signal_text(plain), as_nlohmann(plain));
                inbox_entry traced = with_key;
                traced.trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
                EXPECT_EQ(detail::signal_text(traced), as_nlohmann(traced));
            }
}

// A signal's trace reads back in the store's own form and in nlohmann's, whatever the payload
// ends with; a reader of an earlier build (which knows no trace) reads the rest.
TEST(json_text, an_inbox_signal_with_a_trace_reads_back) {
    const std::string trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for (const auto& payload : values()) {
        inbox_entry s{.id = 4, .key = "k", .path = "paid", .payload = payload, .at = at_ms(9)};
        s.trace = trace;
        auto text = detail::signal_text(s);
        auto back = detail::parse_signal_text(4, text);
        EXPECT_EQ(back.trace, trace) << text;
        EXPECT_EQ(back.payload, payload) << text;
        EXPECT_EQ(back.key, "k");
        auto spaced = nlohmann::json::parse(text).dump(1);  // not the store's own form
        EXPECT_EQ(detail::parse_signal_text(4, spaced).trace, trace) << spaced;
    }
    // A payload that has a "trace" member of its own is the payload's.
    auto own = detail::parse_signal_text(
        1, R"({"at":1,"path":"p","payload":{"a":1,"trace":"x"},"trace":"00-ab"})");
    EXPECT_EQ(own.trace, "00-ab");
    EXPECT_EQ(own.payload, (nlohmann::json{{"a", 1}, {"trace", "x"}}));
    auto payload_only =
        detail::parse_signal_text(1, R"({"at":1,"path":"p","payload":{"trace":"x"}})");
    EXPECT_EQ(payload_only.trace, "");
    // A trace member cut after its opening quote is not the store's form (nlohmann refuses it).
    EXPECT_ANY_THROW(detail::parse_signal_text(1, R"({"at":1,"path":"p","payload":{},"trace":"})"));
    // An arrival the clock cannot hold is refused, in either form, not overflowed.
    EXPECT_THROW(detail::parse_signal_text(1, R"({"at":1764000000123123,"path":"p","payload":1})"),
                 std::invalid_argument);
    EXPECT_THROW(detail::parse_signal_text(1, R"({ "at": -9300000000000, "path": "p" })"),
                 std::invalid_argument);
    auto string_payload = detail::parse_signal_text(1, R"({"at":1,"path":"p","payload":"a\"b"})");
    EXPECT_EQ(string_payload.payload, "a\"b");
    EXPECT_EQ(string_payload.trace, "");
}

TEST(json_text, text_that_is_not_utf8_throws_as_nlohmann_does) {
    journal_entry e{.seq = 1, .kind = op_kind::run, .name = "bad \xff byte"};
    EXPECT_THROW(detail::journal_text(e), nlohmann::json::type_error);
    EXPECT_THROW(nlohmann::json(e).dump(), nlohmann::json::type_error);
    EXPECT_THROW(detail::waits_text({{1, "\xc3"}}), nlohmann::json::type_error);
}

TEST(json_text, a_wait_set_reads_back_in_its_own_form_and_in_any_other) {
    std::vector<signal_wait> waits;
    EXPECT_EQ(detail::parse_waits_text("[]"), waits);
    std::uint64_t seq = 0;
    for (const auto& path : strings) {
        waits.push_back({seq, path});
        seq = seq * 1000 + 7;
        EXPECT_EQ(detail::parse_waits_text(detail::waits_text(waits)), waits);
    }
    // Forms waits_text does not write: nlohmann reads them.
    std::vector<signal_wait> two{{3, "paid"}, {18446744073709551615ull, "a\"b"}};
    EXPECT_EQ(detail::parse_waits_text(R"([ {"seq": 3, "path": "paid"},
                                           {"path":"a\"b","seq":18446744073709551615} ])"),
              two);
    EXPECT_EQ(detail::parse_waits_text(R"([{"seq":3,"path":"paid"}])"),
              (std::vector<signal_wait>{{3, "paid"}}));
    EXPECT_EQ(detail::parse_waits_text(R"([{"path":"p\u0041","seq":1}])"),
              (std::vector<signal_wait>{{1, "pA"}}));
    for (std::string_view bad :
         {"", "[", "[{\"path\":\"p\",\"seq\":1}", "[{\"path\":\"p\"}]",
          "[{\"path\":\"p\",\"seq\":\"1\"}]", "[{\"path\":\"p\",\"seq\":1}]x",
          "[{\"path\":\"p\",\"seq\":1},]", "[1]"})
        EXPECT_ANY_THROW(detail::parse_waits_text(bad)) << bad;
}

TEST(json_text, a_journal_entry_reads_back_with_its_value) {
    for (const auto& name : strings)
        for (const auto& value : values()) {
            journal_entry e{.seq = 9,
                            .kind = op_kind::run,
                            .name = name,
                            .value = value,
                            .failed = true,
                            .at = at_ms(1764000000123),
                            .started = at_ms(1764000000000),
                            .attempts = 4};
            auto back = detail::parse_journal_text(detail::journal_text(e));
            EXPECT_EQ(back, e);
            EXPECT_EQ(back.value, e.value);
            EXPECT_EQ(back.at, e.at);
            EXPECT_EQ(back.started, e.started);
            EXPECT_EQ(back.attempts, e.attempts);
        }
    // Moving the value out gives what copying it does, the checks included.
    auto text = R"({"seq":1,"kind":"run","name":"n","value":{"a":[1,2,{"b":null}]}})";
    journal_entry moved;
    from_json(nlohmann::json::parse(text), moved);
    EXPECT_EQ(moved, nlohmann::json::parse(text).get<journal_entry>());
    EXPECT_EQ(moved.value, (nlohmann::json{{"a", {1, 2, {{"b", nullptr}}}}}));
    std::string deep = R"({"seq":1,"kind":"run","name":"n","value":)" +
                       std::string(max_value_depth + 1, '[') +
                       std::string(max_value_depth + 1, ']') + "}";
    EXPECT_THROW(detail::parse_journal_text(deep), std::invalid_argument);
    EXPECT_THROW(detail::parse_journal_text(R"({"seq":-1,"kind":"run","name":"n"})"),
                 std::invalid_argument);
}

TEST(json_text, an_inbox_signal_reads_back) {
    for (const auto& text : strings)
        for (const auto& payload : values()) {
            inbox_entry s{.id = 12,
                          .key = text,
                          .path = "paid/" + text,
                          .payload = payload,
                          .at = at_ms(1764000000123)};
            auto back = detail::parse_signal_text(12, detail::signal_text(s));
            EXPECT_EQ(back.id, s.id);
            EXPECT_EQ(back.key, s.key);
            EXPECT_EQ(back.path, s.path);
            EXPECT_EQ(back.payload, s.payload);
            EXPECT_EQ(back.at, s.at);
        }
    // Forms signal_text does not write: nlohmann reads them.
    auto other = detail::parse_signal_text(
        2, R"({ "path": "p\u0041", "payload": {"a": [1]}, "at": -7, "key": "k" })");
    EXPECT_EQ(other.path, "pA");
    EXPECT_EQ(other.key, "k");
    EXPECT_EQ(other.payload, (nlohmann::json{{"a", {1}}}));
    EXPECT_EQ(other.at, at_ms(-7));
    for (auto text : {R"({"at":1,"path":"p","payload":{"a":1},"x":{}})",
                      R"({"at":1,"path":"p","payload":1,"x":2})"}) {
        auto more = detail::parse_signal_text(3, text);
        EXPECT_EQ(more.payload, nlohmann::json::parse(text)["payload"]) << text;
    }
    auto bare = detail::parse_signal_text(1, R"({"at":5,"path":"p"})");
    EXPECT_EQ(bare.key, "");
    EXPECT_TRUE(bare.payload.is_null());
    for (auto bad : {R"({"at":5})", R"({"at":5,"path":"p","payload":})",
                     R"({"at":5,"path":"p","payload":{})", R"({"at":"5","path":"p"})"})
        EXPECT_ANY_THROW(detail::parse_signal_text(1, bad)) << bad;
}

}  // namespace
}  // namespace keel::process
