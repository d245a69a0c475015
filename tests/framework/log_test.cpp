// A logger's lines carry its component and fields, in text and in JSON; a field set again
// (the next span's span_id) takes the new value rather than appearing twice.

#include <gtest/gtest.h>

#include <keel/framework/log.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using namespace keel;

// What `write` puts on standard error, at info and in `fmt`.
std::string written(log::format fmt, const log::logger& l, std::string_view message) {
    log::configure({.min_level = log::level::info, .output = fmt});
    testing::internal::CaptureStderr();
    l.info("{}", message);
    auto out = testing::internal::GetCapturedStderr();
    log::configure({});
    return out;
}

TEST(log, a_field_set_again_takes_its_new_value_in_text) {
    auto l = log::logger("process").with("trace_id", "t1").with("span_id", "s1");
    auto line = written(log::format::text, l.with("span_id", "s2"), "resumed");
    EXPECT_NE(line.find("[process] resumed trace_id=t1 span_id=s2"), std::string::npos) << line;
    EXPECT_EQ(line.find("s1"), std::string::npos) << line;
    EXPECT_NE(written(log::format::text, l, "x").find("span_id=s1"), std::string::npos)
        << "the parent logger keeps its own value";
}

TEST(log, a_field_set_again_takes_its_new_value_in_json) {
    auto l = log::logger("process").with("instance", "order/1").with("span_id", "s1");
    auto line = written(log::format::json, l.with("span_id", "s2"), "resumed");
    ASSERT_FALSE(line.empty());
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["component"], "process");
    EXPECT_EQ(j["instance"], "order/1");
    EXPECT_EQ(j["span_id"], "s2");
    EXPECT_EQ(j["msg"], "resumed");
    EXPECT_EQ(line.find("s1"), std::string::npos) << line;
}

}  // namespace
