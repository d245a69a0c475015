#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <keel/framework/config.hpp>

namespace {

using namespace keel::config;
using namespace std::chrono_literals;

schema make_schema() {
    schema s;
    s.add({"port", kind::integer, value{std::int64_t{8080}}, "HTTP port", 1, 65535});
    s.add("redis", kind::string, value{std::string("redis://127.0.0.1:6379")}, "Redis URL");
    s.add("payment_timeout", kind::duration, value{duration{3 * 86'400'000}}, "payment window");
    s.add("verbose", kind::boolean, value{false}, "chatty");
    s.add({"ratio", kind::number, value{0.5}, "a ratio", 0, 1});
    return s;
}

keel::expected<values, error> load_args(const schema& s, std::vector<std::string_view> args,
                                        environment env = {}) {
    return load(s, args, env);
}

TEST(config, defaults_apply) {
    auto v = load_args(make_schema(), {});
    ASSERT_TRUE(v) << v.error().what();
    EXPECT_EQ(v->get_int("port"), 8080);
    EXPECT_EQ(v->get_duration("payment_timeout"), 72h);
    EXPECT_EQ(v->source("port"), "default");
}

TEST(config, flags_beat_env_beat_file) {
    auto path = std::filesystem::temp_directory_path() / "keel-config-test.json";
    std::ofstream(path) << R"({"port": 1000, "redis": "unix:///file", "verbose": true})";
    environment env{
        {"KEEL_CONFIG", path.string()}, {"KEEL_PORT", "2000"}, {"KEEL_PAYMENT_TIMEOUT", "2s"}};
    auto v = load_args(make_schema(), {"--port", "3000", "--ratio=0.25"}, env);
    ASSERT_TRUE(v) << v.error().what();
    EXPECT_EQ(v->get_int("port"), 3000);
    EXPECT_EQ(v->source("port"), "flag");
    EXPECT_EQ(v->get_string("redis"), "unix:///file");
    EXPECT_TRUE(v->get_bool("verbose"));
    EXPECT_EQ(v->get_duration("payment_timeout"), 2s);
    EXPECT_EQ(v->source("payment_timeout"), "env");
    EXPECT_DOUBLE_EQ(v->get_number("ratio"), 0.25);
    std::filesystem::remove(path);
}

TEST(config, dashed_flags_and_bare_booleans) {
    auto v = load_args(make_schema(), {"--payment-timeout", "5m", "--verbose"});
    ASSERT_TRUE(v) << v.error().what();
    EXPECT_EQ(v->get_duration("payment_timeout"), 5min);
    EXPECT_TRUE(v->get_bool("verbose"));
}

// A repeatable option's flags add up, joined with ','; another option's last flag wins, and
// the environment gives a repeatable option one value like any other.
TEST(config, a_repeatable_flag_keeps_every_value) {
    auto s = make_schema();
    option tokens{"token", kind::string, value{std::string()}, "tokens"};
    tokens.repeatable = true;
    s.add(std::move(tokens));
    environment env{{"KEEL_TOKEN", "from-env"}};
    auto v =
        load_args(s, {"--token", "a:1", "--port", "1", "--token=b:2:read", "--port", "2"}, env);
    ASSERT_TRUE(v) << v.error().what();
    EXPECT_EQ(v->get_string("token"), "a:1,b:2:read");
    EXPECT_EQ(v->get_int("port"), 2);
    auto from_env = load_args(s, {}, env);
    ASSERT_TRUE(from_env) << from_env.error().what();
    EXPECT_EQ(from_env->get_string("token"), "from-env");
}

TEST(config, errors_name_the_key_and_why) {
    auto s = make_schema();
    auto unknown = load_args(s, {"--prot", "1"});
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().key, "--prot");
    EXPECT_NE(unknown.error().message.find("unknown"), std::string::npos);

    auto wrong_type = load_args(s, {"--port", "eighty"});
    ASSERT_FALSE(wrong_type);
    EXPECT_EQ(wrong_type.error().key, "--port");
    EXPECT_NE(wrong_type.error().message.find("integer"), std::string::npos);

    auto range = load_args(s, {}, {{"KEEL_PORT", "70000"}});
    ASSERT_FALSE(range);
    EXPECT_EQ(range.error().key, "KEEL_PORT");
    EXPECT_NE(range.error().message.find("maximum"), std::string::npos);

    auto bad_env = load_args(s, {}, {{"KEEL_PORT", "eighty"}});
    ASSERT_FALSE(bad_env);
    EXPECT_EQ(bad_env.error().source, "env");

    auto bad_duration = load_args(s, {"--payment-timeout", "3 days"});
    ASSERT_FALSE(bad_duration);
    EXPECT_NE(bad_duration.error().what().find("duration"), std::string::npos);

    auto missing_value = load_args(s, {"--port"});
    ASSERT_FALSE(missing_value);
    EXPECT_EQ(missing_value.error().message, "missing value");
}

// The environment is shared: a script's KEEL_JOBS or deploy/run.sh's KEEL_REDIS_PORT
// reaches the service, and must neither stop it nor change a setting.
TEST(config, unknown_environment_variables_are_ignored_and_reported) {
    auto s = make_schema();
    auto v =
        load_args(s, {}, {{"KEEL_REDIS_PORT", "6391"}, {"KEEL_JOBS", "1"}, {"KEEL_PORT", "81"}});
    ASSERT_TRUE(v) << v.error().what();
    EXPECT_EQ(v->get_int("port"), 81);
    EXPECT_EQ(v->ignored_environment(), (std::vector<std::string>{"KEEL_REDIS_PORT", "KEEL_JOBS"}));

    auto flag = load_args(s, {"--redis-port", "6391"});
    ASSERT_FALSE(flag);
    EXPECT_EQ(flag.error().source, "flag");
}

TEST(config, file_errors) {
    auto path = std::filesystem::temp_directory_path() / "keel-config-bad.json";
    std::ofstream(path) << R"({"port": "eighty"})";
    auto wrong = load_args(make_schema(), {"--config", path.string()});
    ASSERT_FALSE(wrong);
    EXPECT_EQ(wrong.error().key, "port");

    std::ofstream(path) << R"({"port": 1, )";
    auto malformed = load_args(make_schema(), {"--config", path.string()});
    ASSERT_FALSE(malformed);
    EXPECT_NE(malformed.error().message.find("JSON"), std::string::npos);

    std::ofstream(path) << R"({"colour": "blue"})";
    auto unknown = load_args(make_schema(), {"--config", path.string()});
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().key, "colour");

    // Found by fuzzing: an overflowing duration or integer is refused, not wrapped.
    std::ofstream(path) << R"({"payment_timeout": 1e16})";
    auto forever = load_args(make_schema(), {"--config", path.string()});
    ASSERT_FALSE(forever);
    EXPECT_EQ(forever.error().key, "payment_timeout");
    std::ofstream(path) << R"({"port": 18446744073709551615})";
    auto wrapped = load_args(make_schema(), {"--config", path.string()});
    ASSERT_FALSE(wrapped);
    EXPECT_EQ(wrapped.error().message.find("-1"), std::string::npos) << wrapped.error().what();

    auto absent = load_args(make_schema(), {"--config", "/nonexistent/keel.json"});
    ASSERT_FALSE(absent);
    EXPECT_NE(absent.error().message.find("cannot open"), std::string::npos);
    std::filesystem::remove(path);
}

TEST(config, required_options_and_help) {
    schema s;
    s.add("secret", kind::string, std::nullopt, "required secret");
    auto missing = load_args(s, {});
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().key, "secret");
    auto help = load_args(s, {"--help"});
    ASSERT_TRUE(help);
    EXPECT_TRUE(help->help_requested());
    EXPECT_NE(s.usage("svc").find("--secret"), std::string::npos);
}

TEST(config, durations_parse) {
    EXPECT_EQ(parse_duration("250ms"), duration{250});
    EXPECT_EQ(parse_duration("2s"), duration{2000});
    EXPECT_EQ(parse_duration("5m"), duration{300'000});
    EXPECT_EQ(parse_duration("1h"), duration{3'600'000});
    EXPECT_EQ(parse_duration("3d"), duration{259'200'000});
    EXPECT_FALSE(parse_duration("3"));
    EXPECT_FALSE(parse_duration("-1s"));
    EXPECT_FALSE(parse_duration("s"));
    EXPECT_FALSE(parse_duration("1w"));
}

TEST(config, schema_rejects_duplicates_and_mistyped_defaults) {
    schema s;
    s.add("a", kind::integer, value{std::int64_t{1}}, "");
    EXPECT_THROW(s.add("a", kind::integer, value{std::int64_t{1}}, ""), std::logic_error);
    EXPECT_THROW(s.add("b", kind::integer, value{std::string("x")}, ""), std::logic_error);
}

}  // namespace
