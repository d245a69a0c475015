// keel::fields: a type's JSON described once. The text Keel writes from the description is
// nlohmann's dump of the tree it makes from it, whatever the members; a document reads back
// to the value written; a missing field is an error naming it unless it may be absent; a
// described model is exact and writes its own text (so repositories use both).

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <keel/framework/json_text.hpp>
#include <keel/framework/memory_documents.hpp>
#include <keel/framework/model.hpp>
#include <keel/framework/repository.hpp>
#include <keel/test/run.hpp>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace fields_test {

enum class colour { red = 1, green = 2 };

struct line {
    std::string sku;
    std::int32_t quantity = 0;
    bool operator==(const line&) const = default;
    static constexpr auto json_fields =
        keel::fields(keel::field("sku", &line::sku), keel::field("quantity", &line::quantity));
};

struct basket {
    static constexpr std::string_view model_name = "basket";
    std::string id;
    double total = 0;
    std::uint64_t visits = 0;
    std::int64_t balance = 0;
    bool open = true;
    colour tint = colour::red;              // through nlohmann (an enum: its number)
    std::map<std::string, int> tags;        // through nlohmann
    std::vector<line> lines;                // described, in a vector
    std::vector<std::vector<double>> grid;  // vectors of vectors
    std::vector<std::string> notes;         // added later: older documents lack it
    bool operator==(const basket&) const = default;
    // Listed out of order on purpose: the text is written with keys sorted, as nlohmann does.
    static constexpr auto json_fields = keel::fields(
        keel::field("total", &basket::total), keel::field("id", &basket::id),
        keel::field("visits", &basket::visits), keel::field("balance", &basket::balance),
        keel::field("open", &basket::open), keel::field("tint", &basket::tint),
        keel::field("tags", &basket::tags), keel::field("lines", &basket::lines),
        keel::field("Grid", &basket::grid), keel::field("notes", &basket::notes).may_be_absent());
};

}  // namespace fields_test

namespace {

using fields_test::basket;
using fields_test::line;

static_assert(keel::json_described<basket> && keel::json_described<line>);
static_assert(keel::exact_json<basket>);
static_assert(keel::writes_json_text<basket>);
static_assert(!keel::json_described<std::string>);

std::string text_of(const basket& b) {
    std::string out;
    keel::to_json_text(out, b);
    return out;
}

std::vector<basket> cases() {
    return {
        basket{},
        basket{.id = "b-\"1\"\n\t\x01",
               .total = 0.1,
               .visits = std::numeric_limits<std::uint64_t>::max(),
               .balance = std::numeric_limits<std::int64_t>::min(),
               .open = false,
               .tint = fields_test::colour::green,
               .tags = {{"b", 2}, {"a", 1}},
               .lines = {line{"sku-\xe2\x82\xac", -3}, line{"", 0}},
               .grid = {{1e21, 5e-324}, {}, {-0.0}},
               .notes = {"first", "second"}},
        basket{.id = "b-3", .total = std::numeric_limits<double>::max(), .grid = {{}}},
    };
}

TEST(json_fields, write_the_text_nlohmann_writes_with_keys_sorted) {
    for (const auto& b : cases()) EXPECT_EQ(text_of(b), nlohmann::json(b).dump());
    EXPECT_TRUE(text_of(basket{}).starts_with(R"({"Grid":[],"balance":0,"id":"",)"))
        << text_of(basket{});
}

TEST(json_fields, read_back_the_value_written) {
    for (const auto& b : cases()) EXPECT_EQ(nlohmann::json::parse(text_of(b)).get<basket>(), b);
}

TEST(json_fields, a_missing_field_is_an_error_naming_it_unless_it_may_be_absent) {
    auto doc = nlohmann::json(cases()[1]);
    doc.erase("notes");
    EXPECT_TRUE(doc.get<basket>().notes.empty()) << "may be absent: read as empty";
    doc.erase("visits");
    try {
        (void)doc.get<basket>();
        FAIL() << "a document without visits was read";
    } catch (const nlohmann::json::out_of_range& e) {
        EXPECT_NE(std::string(e.what()).find("'visits'"), std::string::npos) << e.what();
    }
}

TEST(json_fields, refuse_text_that_is_not_utf8_as_nlohmann_does) {
    basket b{.id = "b-\xff"};
    EXPECT_THROW((void)nlohmann::json(b).dump(), nlohmann::json::type_error);
    EXPECT_THROW((void)text_of(b), nlohmann::json::type_error);
}

TEST(json_fields, a_repository_writes_and_reads_a_described_model) {
    keel::system_clock clock;
    keel::memory_documents docs(clock);
    keel::repository<basket> baskets(docs);
    keel::ref<basket> ref("b-1");
    auto want = cases()[1];
    want.id = "b-1";
    boost::asio::io_context io;
    keel::test::run(io, [&]() -> boost::asio::awaitable<void> {
        auto put = co_await baskets.put(ref, want);
        CO_ASSERT_TRUE(put.has_value());
        auto raw = co_await docs.get("basket", "b-1");
        CO_ASSERT_TRUE(raw && raw->has_value());
        EXPECT_EQ(**raw, nlohmann::json(want).dump());
        auto got = co_await baskets.get(ref);
        CO_ASSERT_TRUE(got && got->has_value());
        EXPECT_EQ(**got, want);
    }());
}

}  // namespace
