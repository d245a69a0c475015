// The Redis store's scripts carry only the prelude helpers they use (process/src/lua_prelude.hpp).
// That every store script still finds each helper it calls is what the store's tests on Redis
// show: a missing one fails the script when it runs.

#include "lua_prelude.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

using keel::process::detail::prelude_for;

constexpr const char* helpers =
    "-- header comment\n"
    "\n"
    "local function a(x) return x end\n"
    "-- b uses a\n"
    "local function b(x)\n"
    "  return a(x) + 1\n"
    "end\n"
    "local function c() return 2 end\n"
    "local states, kinds = {'x'}, {'y'}\n"
    "local function bb() return kinds end\n";

TEST(lua_prelude, a_script_carries_the_helpers_it_uses_and_theirs_in_their_order) {
    auto got = prelude_for(helpers, "return b(1)");
    EXPECT_EQ(got,
              "local function a(x) return x end\n"
              "-- b uses a\n"
              "local function b(x)\n"
              "  return a(x) + 1\n"
              "end\n");
}

TEST(lua_prelude, names_are_whole_words) {
    // "bb" is not "b"; "a" inside "bb" or "kinds" is not "a".
    auto got = prelude_for(helpers, "return bb()");
    EXPECT_EQ(got,
              "local states, kinds = {'x'}, {'y'}\n"
              "local function bb() return kinds end\n");
}

TEST(lua_prelude, a_script_that_uses_none_carries_none) {
    EXPECT_EQ(prelude_for(helpers, "return redis.call('GET', KEYS[1])"), "");
}

TEST(lua_prelude, code_before_the_first_definition_is_refused) {
    EXPECT_THROW(prelude_for("x = 1\nlocal function a() end\n", "a()"), std::logic_error);
}

}  // namespace
