// The store's JSON texts written by hand (process/src/json_text.hpp) are the texts nlohmann
// writes for the same values, byte for byte: what is stored stays readable both ways.

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
            }
}

TEST(json_text, text_that_is_not_utf8_throws_as_nlohmann_does) {
    journal_entry e{.seq = 1, .kind = op_kind::run, .name = "bad \xff byte"};
    EXPECT_THROW(detail::journal_text(e), nlohmann::json::type_error);
    EXPECT_THROW(nlohmann::json(e).dump(), nlohmann::json::type_error);
    EXPECT_THROW(detail::waits_text({{1, "\xc3"}}), nlohmann::json::type_error);
}

}  // namespace
}  // namespace keel::process
