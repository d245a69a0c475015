#include "new_project.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "templates.hpp"

namespace keel::cli {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t max_name_length = 64;

// Lower-case words a name may not be: C++ keywords and alternative tokens (the namespace),
// namespaces the generated code uses beside its own (std, keel, boost, testing: GoogleTest's),
// and target names CMake reserves.
constexpr std::array reserved_words = {"alignas",       "alignof",     "and",
                                       "and_eq",        "asm",         "auto",
                                       "bitand",        "bitor",       "bool",
                                       "break",         "case",        "catch",
                                       "char",          "char8_t",     "char16_t",
                                       "char32_t",      "class",       "compl",
                                       "concept",       "const",       "consteval",
                                       "constexpr",     "constinit",   "const_cast",
                                       "continue",      "co_await",    "co_return",
                                       "co_yield",      "decltype",    "default",
                                       "delete",        "do",          "double",
                                       "dynamic_cast",  "else",        "enum",
                                       "explicit",      "export",      "extern",
                                       "false",         "float",       "for",
                                       "friend",        "goto",        "if",
                                       "inline",        "int",         "long",
                                       "mutable",       "namespace",   "new",
                                       "noexcept",      "not",         "not_eq",
                                       "nullptr",       "operator",    "or",
                                       "or_eq",         "private",     "protected",
                                       "public",        "register",    "reinterpret_cast",
                                       "requires",      "return",      "short",
                                       "signed",        "sizeof",      "static",
                                       "static_assert", "static_cast", "struct",
                                       "switch",        "template",    "this",
                                       "thread_local",  "throw",       "true",
                                       "try",           "typedef",     "typeid",
                                       "typename",      "union",       "unsigned",
                                       "using",         "virtual",     "void",
                                       "volatile",      "wchar_t",     "while",
                                       "xor",           "xor_eq",      "std",
                                       "keel",          "boost",       "testing",
                                       "all",           "clean",       "help",
                                       "install",       "package",     "test"};

std::string namespace_of(std::string_view name) {
    std::string ns(name);
    std::replace(ns.begin(), ns.end(), '-', '_');
    return ns;
}

std::string_view output_name(std::string_view template_name) {
    template_name.remove_suffix(std::string_view(".in").size());
    return template_name;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
}

// The directory to write into: created, or existing and empty.
void prepare(const fs::path& dir) {
    std::error_code ec;
    auto status = fs::status(dir, ec);
    if (fs::exists(status)) {
        if (!fs::is_directory(status))
            throw std::runtime_error(dir.string() + " exists and is not a directory");
        if (!fs::is_empty(dir))
            throw std::runtime_error(dir.string() +
                                     " exists and is not empty: keel new writes only into a new "
                                     "or an empty directory");
        return;
    }
    fs::create_directories(dir);
}

void write_file(const fs::path& path, const std::string& text) {
    std::ofstream file(path, std::ios::binary);
    file << text;
    file.close();
    if (!file) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

std::optional<std::string> invalid_project_name(std::string_view name) {
    auto why = [&](std::string_view reason) {
        return "invalid project name \"" + std::string(name) + "\": " + std::string(reason);
    };
    if (name.empty()) return "the project needs a name: keel new <name>";
    if (name.size() > max_name_length) return why("at most 64 characters");
    bool plain = name.front() >= 'a' && name.front() <= 'z' &&
                 std::all_of(name.begin(), name.end(), [](char c) {
                     return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
                 });
    if (!plain)
        return why("a lower-case letter, then lower-case letters, digits and '-' (my-service)");
    auto ns = namespace_of(name);
    if (std::find(reserved_words.begin(), reserved_words.end(), ns) != reserved_words.end())
        return why("a word C++, CMake or the generated code already uses; choose another");
    return std::nullopt;
}

std::string render_template(std::string_view body, std::string_view name) {
    std::string text(body);
    replace_all(text, "@namespace@", namespace_of(name));
    replace_all(text, "@name@", name);
    return text;
}

exit_code run_new(const new_options& options, std::ostream& out) {
    if (auto why = invalid_project_name(options.name)) throw usage_error(*why);
    fs::path dir = options.dir.empty() ? fs::path(options.name) : fs::path(options.dir);
    prepare(dir);
    std::vector<std::string> written;
    for (const auto& t : project_templates()) {
        auto path = dir / output_name(t.name);
        write_file(path, render_template(t.body, options.name));
        written.push_back(path.string());
    }
    std::sort(written.begin(), written.end());
    for (const auto& path : written) out << "created " << path << "\n";
    out << "next: cd " << dir.string() << ", then see README.md to build, test and run it\n";
    return exit_code::ok;
}

}  // namespace keel::cli
