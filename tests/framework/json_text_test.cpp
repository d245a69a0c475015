// keel::dump_json against nlohmann's dump(): the same bytes for every kind of value, the same
// exceptions for text that is not UTF-8, and the same replacements when asked for them.

#include <gtest/gtest.h>

#include <keel/framework/json_text.hpp>
#include <limits>
#include <random>
#include <string>

namespace {

using nlohmann::json;
using handler = keel::json_utf8_handler;

void expect_as_nlohmann(const json& value) {
    EXPECT_EQ(keel::dump_json(value), value.dump()) << "for " << value.dump();
    for (auto h : {handler::replace, handler::ignore})
        EXPECT_EQ(keel::dump_json(value, h), value.dump(-1, ' ', false, h));
}

TEST(json_text, scalars_as_nlohmann) {
    for (const json& v : {json(nullptr),
                          json(true),
                          json(false),
                          json(0),
                          json(-1),
                          json(42),
                          json(std::numeric_limits<std::int64_t>::min()),
                          json(std::numeric_limits<std::int64_t>::max()),
                          json(std::numeric_limits<std::uint64_t>::max()),
                          json(0u),
                          json(0.0),
                          json(-0.0),
                          json(42.0),
                          json(42.5),
                          json(0.1),
                          json(1.0 / 3),
                          json(1e20),
                          json(1e21),
                          json(1e-7),
                          json(-1e-300),
                          json(1.7976931348623157e308),
                          json(5e-324),
                          json(std::numeric_limits<double>::quiet_NaN()),
                          json(std::numeric_limits<double>::infinity()),
                          json(-std::numeric_limits<double>::infinity())})
        expect_as_nlohmann(v);
}

TEST(json_text, strings_as_nlohmann) {
    for (std::string s :
         {"", "plain", "with \"quotes\"", "back\\slash", "tab\there", "nl\n", "\x01\x1f", "del\x7f",
          "caf\xc3\xa9", "\xe2\x82\xac 5", "\xf0\x9f\x9a\x80", "/slash", "</script>"})
        expect_as_nlohmann(json(s));
}

TEST(json_text, containers_as_nlohmann) {
    expect_as_nlohmann(json::object());
    expect_as_nlohmann(json::array());
    expect_as_nlohmann(json::parse(R"({"b":1,"a":[1,2.5,"x",null,{"z":{},"y":[]}],"c":true})"));
    expect_as_nlohmann(json::parse(R"([[[[]]],{"k\"ey":"v\u0001"},{"\u00e9":"\u20ac"}])"));
    expect_as_nlohmann(json::binary({1, 2, 3}, 7));
    expect_as_nlohmann(json::object({{"bin", json::binary({9})}}));
}

TEST(json_text, text_that_is_not_utf8_as_nlohmann) {
    for (std::string bad : {"\xff", "ok\xc3", "\xc3\x28", "a\xed\xa0\x80z"}) {
        for (const json& v : {json(bad), json::object({{bad, 1}}), json::array({"x", bad})}) {
            EXPECT_THROW((void)keel::dump_json(v), json::type_error);
            try {
                (void)v.dump();
            } catch (const json::type_error& expected) {
                try {
                    (void)keel::dump_json(v);
                } catch (const json::type_error& got) {
                    EXPECT_STREQ(got.what(), expected.what());
                    EXPECT_EQ(got.id, expected.id);
                }
            }
            EXPECT_EQ(keel::dump_json(v, handler::replace),
                      v.dump(-1, ' ', false, handler::replace));
            EXPECT_EQ(keel::dump_json(v, handler::ignore), v.dump(-1, ' ', false, handler::ignore));
        }
    }
}

TEST(json_text, append_json_string_quotes_and_escapes_as_nlohmann) {
    for (std::string s : {"", "id-1", "a\"b", "x\\y", "\n", "\xc3\xa9"}) {
        std::string out = "[";
        keel::append_json_string(out, s);
        EXPECT_EQ(out, "[" + json(s).dump());
    }
    std::string out;
    EXPECT_THROW(keel::append_json_string(out, "\xff"), json::type_error);
}

TEST(json_text, append_json_number_writes_numbers_as_nlohmann) {
    for (double x :
         {0.0, -0.0, 9.5, 0.1, 1.0 / 3, 1e21, 5e-324, 1.7976931348623157e308,
          std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
        std::string out = "[";
        keel::append_json_number(out, x);
        EXPECT_EQ(out, "[" + json(x).dump());
    }
    for (std::int64_t n :
         {std::int64_t{0}, std::int64_t{-7}, std::numeric_limits<std::int64_t>::min()}) {
        std::string out;
        keel::append_json_number(out, n);
        EXPECT_EQ(out, json(n).dump());
    }
    std::string out;
    keel::append_json_number(out, std::numeric_limits<std::uint64_t>::max());
    EXPECT_EQ(out, json(std::numeric_limits<std::uint64_t>::max()).dump());
}

TEST(json_text, append_json_appends) {
    std::string out = "prefix:";
    keel::append_json(out, json::parse(R"({"a":[1,"b"]})"));
    EXPECT_EQ(out, R"(prefix:{"a":[1,"b"]})");
}

// Random documents of every kind, nested: what a service might write.
json random_value(std::mt19937_64& rng, int depth) {
    std::uniform_int_distribution<int> pick(0, depth > 3 ? 6 : 8);
    auto text = [&] {
        static const std::string alphabet = "abc XYZ019\"\\/\n\t\x01\x7f\xc3\xa9\xe2\x82\xac";
        std::string s;
        for (int n = std::uniform_int_distribution<int>(0, 12)(rng); n > 0; --n) {
            auto i = std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng);
            // Whole multi-byte characters only: the valid UTF-8 a service has parsed.
            if (static_cast<unsigned char>(alphabet[i]) >= 0x80) {
                s += i < alphabet.size() - 3 ? "\xc3\xa9" : "\xe2\x82\xac";
            } else {
                s += alphabet[i];
            }
        }
        return s;
    };
    switch (pick(rng)) {
        case 0:
            return nullptr;
        case 1:
            return rng() % 2 == 0;
        case 2:
            return static_cast<std::int64_t>(rng());
        case 3:
            return rng();
        case 4:
            return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
        case 5:
            return std::ldexp(static_cast<double>(rng() >> 11),
                              static_cast<int>(rng() % 200) - 100);
        case 6:
            return text();
        case 7: {
            json a = json::array();
            for (int n = static_cast<int>(rng() % 5); n > 0; --n)
                a.push_back(random_value(rng, depth + 1));
            return a;
        }
        default: {
            json o = json::object();
            for (int n = static_cast<int>(rng() % 5); n > 0; --n)
                o[text()] = random_value(rng, depth + 1);
            return o;
        }
    }
}

TEST(json_text, random_documents_as_nlohmann) {
    std::mt19937_64 rng(20261127);
    for (int i = 0; i < 5000; ++i) {
        auto v = random_value(rng, 0);
        ASSERT_EQ(keel::dump_json(v), v.dump()) << "document " << i;
    }
}

}  // namespace
