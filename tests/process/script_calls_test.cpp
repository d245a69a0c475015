// The Redis store's scripts and their callers agree on ARGV through one declaration per script
// (process/src/script_calls.hpp). These cases check the scripts' side: each reads exactly the
// arguments declared for it, by name, and no ARGV slot by number. That the assembled scripts
// run is what the store's tests on Redis show.

#include "script_calls.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <tuple>

#include "lua_scripts.hpp"

namespace {

namespace scripts = keel::process::detail::scripts;
using keel::process::detail::lua;

using all_scripts =
    std::tuple<scripts::start_args, scripts::load_args, scripts::commit_args, scripts::append_args,
               scripts::deliver_args, scripts::fan_out_args, scripts::acquire_args,
               scripts::renew_args, scripts::release_args, scripts::claim_args,
               scripts::rewind_args, scripts::list_args, scripts::note_attempt_args,
               scripts::announce_args, scripts::shards_args, scripts::identity_args,
               scripts::changed_args, scripts::counts_args, scripts::remove_signal_args>;

template <class F>
void for_each_script(F f) {
    std::apply([&](auto... args) { (f(args), ...); }, all_scripts{});
}

std::set<std::string> words_matching(std::string_view text, const std::regex& pattern) {
    std::set<std::string> out;
    std::string s(text);
    for (auto it = std::sregex_iterator(s.begin(), s.end(), pattern); it != std::sregex_iterator();
         ++it)
        out.insert(it->str());
    return out;
}

// A script's text without its comments: a name in a comment is not a use.
std::string code_of(std::string_view body) {
    std::string out;
    std::size_t at = 0;
    while (at < body.size()) {
        auto end = body.find('\n', at);
        if (end == std::string_view::npos) end = body.size();
        auto line = body.substr(at, end - at);
        out += line.substr(0, line.find("--"));
        out += '\n';
        at = end + 1;
    }
    return out;
}

TEST(script_calls, every_script_reads_arguments_by_name_only) {
    const std::regex slot(R"(ARGV\s*\[\s*[0-9])");
    for_each_script([&](auto args) {
        using Args = decltype(args);
        auto code = code_of(lua(Args::file));
        EXPECT_FALSE(std::regex_search(code, slot))
            << Args::file << " reads an ARGV slot by number: name it in script_calls.hpp";
    });
}

TEST(script_calls, every_script_names_only_its_declared_arguments) {
    const std::regex name(R"(\barg_[A-Za-z0-9_]+)");
    for_each_script([&](auto args) {
        using Args = decltype(args);
        auto declared = scripts::lua_names<Args>();
        for (const auto& used : words_matching(code_of(lua(Args::file)), name))
            EXPECT_NE(std::find(declared.begin(), declared.end(), used), declared.end())
                << Args::file << " reads " << used << ", which script_calls.hpp does not declare";
    });
}

TEST(script_calls, every_declared_argument_is_read_by_its_script) {
    const std::regex name(R"(\barg_[A-Za-z0-9_]+)");
    for_each_script([&](auto args) {
        using Args = decltype(args);
        auto used = words_matching(code_of(lua(Args::file)), name);
        auto declared = scripts::lua_names<Args>();
        for (const auto& d : declared) {
            if (used.contains(d)) continue;
            // A list is read through its count or its first slot; either will do.
            bool list_read = false;
            for (std::string_view suffix : {"_n", "_at"}) {
                if (!d.ends_with(suffix)) continue;
                auto stem = d.substr(0, d.size() - suffix.size());
                list_read = used.contains(stem + "_n") || used.contains(stem + "_at");
            }
            EXPECT_TRUE(list_read) << Args::file << " never reads " << d
                                   << ", which its callers send (script_calls.hpp)";
        }
    });
}

struct sample {
    std::string id;
    bool flag = false;
    std::uint64_t count = 0;
    scripts::list<1> ones;
    scripts::list<2> pairs;
    std::string last;

    static constexpr auto fields() {
        using a = sample;
        return std::tuple{scripts::arg("id", &a::id),       scripts::arg("flag", &a::flag),
                          scripts::arg("count", &a::count), scripts::arg("ones", &a::ones),
                          scripts::arg("pairs", &a::pairs), scripts::arg("last", &a::last)};
    }
};

TEST(script_calls, argv_holds_the_fixed_arguments_then_each_lists_items) {
    sample s{.id = "i", .flag = true, .count = 42, .ones = {}, .pairs = {}, .last = "z"};
    s.ones.add("a");
    s.ones.add("b");
    s.pairs.add("k", "v");
    EXPECT_EQ(scripts::argv(s),
              (std::vector<std::string>{"i", "1", "42", "2", "1", "z", "a", "b", "k", "v"}));
    EXPECT_EQ(scripts::argv(sample{}), (std::vector<std::string>{"", "0", "0", "0", "0", ""}));
}

TEST(script_calls, the_script_finds_each_argument_where_argv_put_it) {
    EXPECT_EQ(scripts::lua_arguments<sample>(),
              "local arg_id = ARGV[1]\n"
              "local arg_flag = ARGV[2]\n"
              "local arg_count = ARGV[3]\n"
              "local arg_ones_n = tonumber(ARGV[4])\n"
              "local arg_pairs_n = tonumber(ARGV[5])\n"
              "local arg_last = ARGV[6]\n"
              "local arg_ones_at = 7\n"
              "local arg_pairs_at = arg_ones_at + 1 * arg_ones_n\n");
}

}  // namespace
