#include "lua_prelude.hpp"

#include <set>
#include <stdexcept>
#include <vector>

namespace keel::process::detail {
namespace {

bool starts_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool in_word(char c) {
    return starts_word(c) || (c >= '0' && c <= '9');
}

// Every Lua name-like word of `text` (in strings and comments too: a helper kept for a word
// in a comment costs a closure, one dropped that is used would fail the script).
void add_words(std::string_view text, std::set<std::string_view>& words) {
    for (std::size_t i = 0; i < text.size();) {
        if (!starts_word(text[i]) || (i > 0 && in_word(text[i - 1]))) {
            ++i;
            continue;
        }
        std::size_t end = i;
        while (end < text.size() && in_word(text[end])) ++end;
        words.insert(text.substr(i, end - i));
        i = end;
    }
}

struct definition {
    std::string_view text;
    std::vector<std::string_view> names;
};

// The names a definition's first line introduces.
std::vector<std::string_view> names_of(std::string_view line) {
    line.remove_prefix(std::string_view("local ").size());
    if (line.starts_with("function ")) line.remove_prefix(std::string_view("function ").size());
    std::vector<std::string_view> names;
    std::size_t i = 0;
    for (;;) {
        while (i < line.size() && line[i] == ' ') ++i;
        std::size_t end = i;
        while (end < line.size() && in_word(line[end])) ++end;
        if (end == i) break;
        names.push_back(line.substr(i, end - i));
        i = end;
        while (i < line.size() && line[i] == ' ') ++i;
        if (i >= line.size() || line[i] != ',') break;
        ++i;
    }
    return names;
}

bool is_comment_or_blank(std::string_view line) {
    auto first = line.find_first_not_of(" \t\r\n");
    return first == std::string_view::npos || line.substr(first).starts_with("--");
}

std::vector<definition> definitions(std::string_view helpers) {
    std::vector<definition> out;
    std::size_t at = 0;
    while (at < helpers.size()) {
        auto end = helpers.find('\n', at);
        end = end == std::string_view::npos ? helpers.size() : end + 1;
        auto line = helpers.substr(at, end - at);
        if (line.starts_with("local ")) {
            auto names = names_of(line);
            if (names.empty()) throw std::logic_error("Lua prelude: a definition without a name");
            out.push_back({line, std::move(names)});
        } else if (!out.empty()) {
            auto& last = out.back().text;
            last = std::string_view(last.data(), last.size() + line.size());
        } else if (!is_comment_or_blank(line)) {
            throw std::logic_error("Lua prelude: code before the first definition");
        }
        at = end;
    }
    return out;
}

}  // namespace

std::string prelude_for(std::string_view helpers, std::string_view body) {
    auto defs = definitions(helpers);
    std::set<std::string_view> wanted;
    add_words(body, wanted);
    std::vector<bool> kept(defs.size(), false);
    for (bool grew = true; grew;) {
        grew = false;
        for (std::size_t i = 0; i < defs.size(); ++i) {
            if (kept[i]) continue;
            for (auto name : defs[i].names) {
                if (!wanted.contains(name)) continue;
                kept[i] = true;
                add_words(defs[i].text, wanted);
                grew = true;
                break;
            }
        }
    }
    std::string out;
    for (std::size_t i = 0; i < defs.size(); ++i)
        if (kept[i]) out += defs[i].text;
    return out;
}

}  // namespace keel::process::detail
