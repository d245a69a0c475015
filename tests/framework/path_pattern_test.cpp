// fill_pattern, match_pattern and pattern_segments: the paths of signals and process
// definitions, filled on every emit and matched on every delivery by path.

#include <gtest/gtest.h>

#include <keel/framework/path_pattern.hpp>
#include <stdexcept>

namespace {

using strings = std::vector<std::string>;
using views = std::vector<std::string_view>;

TEST(path_pattern, segments_are_split_at_slashes_keeping_empty_ones) {
    EXPECT_EQ(keel::pattern_segments("/order/:order/fulfillment"),
              (views{"order", ":order", "fulfillment"}));
    EXPECT_EQ(keel::pattern_segments("/a//b/"), (views{"a", "", "b", ""}));
    EXPECT_EQ(keel::pattern_segments("/"), (views{""}));
    EXPECT_EQ(keel::pattern_segments("a/b"), (views{"a", "b"}));
}

TEST(path_pattern, fill_puts_the_values_in_order) {
    EXPECT_EQ(keel::fill_pattern("/payment/:order/received", {"o-1"}, "signal"),
              "/payment/o-1/received");
    EXPECT_EQ(keel::fill_pattern("/:a/x/:b", {"1", "22"}, "signal"), "/1/x/22");
    EXPECT_EQ(keel::fill_pattern("/fixed", {}, "signal"), "/fixed");
}

TEST(path_pattern, fill_refuses_missing_empty_and_slashed_values_naming_the_parameter) {
    try {
        keel::fill_pattern("/p/:order/:line", {"o-1"}, "signal");
        FAIL() << "a missing value was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()), "signal /p/:order/:line: no value for parameter :line");
    }
    EXPECT_THROW(keel::fill_pattern("/p/:order", {""}, "signal"), std::invalid_argument);
    try {
        keel::fill_pattern("/p/:order", {"a/b"}, "process");
        FAIL() << "a value with a slash was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()),
                  "process /p/:order: parameter :order must be a non-empty path segment, got "
                  "\"a/b\"");
    }
}

TEST(path_pattern, match_gives_the_parameters_of_a_path_with_the_same_segments) {
    strings values{"left over"};
    ASSERT_TRUE(keel::match_pattern("/payment/:order/received", "/payment/o-1/received", values));
    EXPECT_EQ(values, (strings{"o-1"}));
    ASSERT_TRUE(keel::match_pattern("/:a/x/:b", "/1/x/22", values));
    EXPECT_EQ(values, (strings{"1", "22"}));
    ASSERT_TRUE(keel::match_pattern("/fixed/path", "/fixed/path", values));
    EXPECT_TRUE(values.empty());
}

TEST(path_pattern, a_path_that_does_not_match_leaves_the_values_alone) {
    strings values{"kept"};
    EXPECT_FALSE(keel::match_pattern("/payment/:order/received", "/payment/o-1/failed", values));
    EXPECT_FALSE(keel::match_pattern("/payment/:order/received", "/payment/o-1", values));
    EXPECT_FALSE(
        keel::match_pattern("/payment/:order/received", "/payment/o-1/received/x", values));
    EXPECT_FALSE(keel::match_pattern("/payment/:order/received", "/payment//received", values));
    EXPECT_FALSE(keel::match_pattern("/payment/:order/received", "payment/o-1/received", values));
    EXPECT_FALSE(keel::match_pattern("/a/:b", "/a/", values));
    EXPECT_EQ(values, (strings{"kept"}));
}

TEST(path_pattern, filling_then_matching_gives_the_values_back) {
    const char* pattern = "/shipping/:order/:parcel/delivered";
    strings values{"o-7", "p%2F1"};
    strings back;
    ASSERT_TRUE(keel::match_pattern(pattern, keel::fill_pattern(pattern, values, "signal"), back));
    EXPECT_EQ(back, values);
}

}  // namespace
