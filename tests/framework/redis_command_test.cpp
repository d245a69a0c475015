// Commands as the connection sends them: RESP arrays of bulk strings, byte for byte what
// hiredis's redisFormatCommandArgv makes of the same arguments (Keel's encoder replaced it).

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <keel/framework/redis/connection.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

using keel::redis::command;

std::string by_hiredis(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& a : args) {
        argv.push_back(a.data());
        lengths.push_back(a.size());
    }
    char* out = nullptr;
    int n =
        redisFormatCommandArgv(&out, static_cast<int>(args.size()), argv.data(), lengths.data());
    std::string s(out, static_cast<std::size_t>(n));
    redisFreeCommand(out);
    return s;
}

TEST(redis_command, a_command_is_an_array_of_bulk_strings) {
    EXPECT_EQ(command("SET", "k", "").payload(), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    EXPECT_EQ(command("INCRBY", "k", -42).payload(),
              "*3\r\n$6\r\nINCRBY\r\n$1\r\nk\r\n$3\r\n-42\r\n");
    std::string binary("a\r\n\0b", 5);
    EXPECT_EQ(command("SET", "k", binary).payload(),
              "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\n" + binary + "\r\n");
}

TEST(redis_command, encodes_as_hiredis_does_at_every_length_and_count) {
    std::mt19937_64 rng(7);
    for (std::size_t count : {1, 9, 10, 11, 99, 100, 1000}) {
        for (std::size_t length : {0, 1, 9, 10, 99, 100, 1000, 100000}) {
            std::vector<std::string> args;
            for (std::size_t i = 0; i < count; ++i) {
                std::string a(i % 2 ? length : rng() % (length + 1), '\0');
                for (auto& c : a) c = static_cast<char>(rng());
                args.push_back(std::move(a));
            }
            ASSERT_EQ(command::from_args(std::span<const std::string>(args)).payload(),
                      by_hiredis(args))
                << count << " arguments of up to " << length << " bytes";
            std::vector<std::string_view> views(args.begin(), args.end());
            ASSERT_EQ(command::from_args(std::span<const std::string_view>(views)).payload(),
                      by_hiredis(args));
        }
    }
}

}  // namespace
