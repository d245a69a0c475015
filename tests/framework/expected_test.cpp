#include <gtest/gtest.h>

#include <keel/framework/expected.hpp>
#include <string>

namespace {

keel::expected<int, std::string> half(int x) {
    if (x % 2) return keel::unexpected(std::string("odd"));
    return x / 2;
}

TEST(expected, holds_value_or_error) {
    auto ok = half(4);
    ASSERT_TRUE(ok);
    EXPECT_EQ(*ok, 2);
    auto bad = half(3);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error(), "odd");
    EXPECT_EQ(bad.value_or(7), 7);
    EXPECT_THROW((void)bad.value(), keel::bad_expected_access);
}

TEST(expected, void_specialisation) {
    keel::expected<void, std::string> ok;
    EXPECT_TRUE(ok.has_value());
    keel::expected<void, std::string> bad = keel::unexpected(std::string("no"));
    EXPECT_FALSE(bad);
    EXPECT_EQ(bad.error(), "no");
    EXPECT_THROW(bad.value(), keel::bad_expected_access);
}

}  // namespace
