// keel new: the project it writes (every template, the name in place, nothing left to
// fill in), where it writes it, and the names and directories it refuses, with exit codes
// and messages, writing nothing. tests/install/getting_started.sh builds, runs and tests
// the project it writes against the installed package.

#include "new_project.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "run_cli.hpp"
#include "templates.hpp"

namespace keel::cli {
namespace {

namespace fs = std::filesystem;

using testing::cli_result;
using testing::contains;
using testing::run;

std::string read(const fs::path& path) {
    std::ifstream file(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// A directory of its own for each test, removed after it.
class new_project : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "keel-new-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        root_ = pattern;
    }
    void TearDown() override { fs::remove_all(root_); }

    // The files under `dir`, by name.
    static std::map<std::string, std::string> files_in(const fs::path& dir) {
        std::map<std::string, std::string> files;
        for (const auto& entry : fs::directory_iterator(dir))
            files[entry.path().filename().string()] = read(entry.path());
        return files;
    }

    fs::path root_;
};

const std::vector<std::string> project_files = {"CMakeLists.txt",
                                                "README.md",
                                                "booking.cpp",
                                                "booking.hpp",
                                                "booking_controller.cpp",
                                                "booking_controller.hpp",
                                                "booking_test.cpp",
                                                "main.cpp"};

TEST_F(new_project, writes_the_project_with_its_name_in_place) {
    auto dir = root_ / "svc";
    auto r = run({"new", "my-svc", "--dir", dir.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    auto files = files_in(dir);
    std::vector<std::string> names;
    for (const auto& [name, text] : files) names.push_back(name);
    EXPECT_EQ(names, project_files);
    for (const auto& name : project_files)
        EXPECT_TRUE(contains(r.out, "created " + (dir / name).string() + "\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "next: cd " + dir.string())) << r.out;

    for (const auto& [name, text] : files) {
        EXPECT_FALSE(contains(text, "@name@")) << name;
        EXPECT_FALSE(contains(text, "@namespace@")) << name;
    }
    EXPECT_TRUE(contains(files["CMakeLists.txt"], "project(my-svc CXX)"));
    EXPECT_TRUE(contains(files["CMakeLists.txt"], "find_package(keel REQUIRED)"));
    EXPECT_TRUE(contains(files["CMakeLists.txt"], "keel_precompile(my-svc-lib)"));
    EXPECT_TRUE(contains(files["main.cpp"], "keel::app::application(\"my-svc\")"));
    EXPECT_TRUE(contains(files["main.cpp"], ".processes(my_svc::booking_hold)"));
    EXPECT_TRUE(contains(files["booking.hpp"], "namespace my_svc {"));
    EXPECT_TRUE(contains(files["booking_test.cpp"], "keel/process/testing.hpp"));
    EXPECT_TRUE(contains(files["README.md"], "# my-svc\n"));
    // The commands docs/guide/getting-started.md runs.
    EXPECT_TRUE(
        contains(files["README.md"],
                 "cmake -B build -G Ninja && cmake --build build && ctest --test-dir build"));
    EXPECT_TRUE(contains(files["README.md"], "build/my-svc --signal-route"));
}

TEST_F(new_project, writes_into_a_directory_named_after_the_project_by_default) {
    auto before = fs::current_path();
    fs::current_path(root_);
    auto r = run({"new", "demo"});
    fs::current_path(before);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(fs::exists(root_ / "demo" / "main.cpp"));
    EXPECT_TRUE(contains(r.out, "created demo/main.cpp\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "next: cd demo,")) << r.out;
}

TEST_F(new_project, writes_into_an_empty_directory_that_exists) {
    fs::create_directory(root_ / "empty");
    auto r = run({"new", "demo", "--dir", (root_ / "empty").string()});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(files_in(root_ / "empty").size(), project_files.size());
}

TEST_F(new_project, refuses_a_directory_that_is_not_empty_and_leaves_it_alone) {
    auto dir = root_ / "taken";
    fs::create_directory(dir);
    std::ofstream(dir / "main.cpp") << "mine";
    auto r = run({"new", "demo", "--dir", dir.string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "keel: " + dir.string() +
                         " exists and is not empty: keel new writes only into a new or an "
                         "empty directory\n");
    EXPECT_EQ(files_in(dir), (std::map<std::string, std::string>{{"main.cpp", "mine"}}));
}

TEST_F(new_project, refuses_a_file_in_the_way) {
    std::ofstream(root_ / "demo") << "a file";
    auto r = run({"new", "demo", "--dir", (root_ / "demo").string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "exists and is not a directory")) << r.err;
    EXPECT_EQ(read(root_ / "demo"), "a file");
}

TEST_F(new_project, refuses_bad_names_with_usage_errors_and_writes_nothing) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"", "the project needs a name: keel new <name>"},
        {"Demo", "a lower-case letter, then lower-case letters, digits and '-'"},
        {"1demo", "a lower-case letter"},
        {"-demo", "name is required"},  // read as an option: no name
        {"my_svc", "a lower-case letter"},
        {"my svc", "a lower-case letter"},
        {"../demo", "a lower-case letter"},
        {"d\xc3\xa9mo", "a lower-case letter"},
        {std::string(65, 'a'), "at most 64 characters"},
        {"new", "a word C++, CMake or the generated code already uses"},
        {"class", "a word C++, CMake or the generated code already uses"},
        {"keel", "a word C++, CMake or the generated code already uses"},
        {"std", "a word C++, CMake or the generated code already uses"},
        {"test", "a word C++, CMake or the generated code already uses"},
    };
    for (const auto& [name, message] : cases) {
        auto dir = root_ / "out";
        auto r = run({"new", name, "--dir", dir.string()});
        EXPECT_EQ(r.code, 2) << name;
        EXPECT_EQ(r.out, "") << name;
        EXPECT_TRUE(contains(r.err, message)) << name << ": " << r.err;
        EXPECT_FALSE(fs::exists(dir)) << name;
    }
    EXPECT_EQ(invalid_project_name(std::string(64, 'a')), std::nullopt);
    EXPECT_EQ(invalid_project_name("a"), std::nullopt);
    EXPECT_EQ(invalid_project_name("new-thing-2"), std::nullopt);
}

TEST_F(new_project, a_missing_name_is_a_usage_error) {
    auto r = run({"new"});
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(contains(r.err, "name is required")) << r.err;
}

TEST_F(new_project, needs_no_service) {
    ::setenv("KEEL_ADMIN_URL", "not a url", 1);
    auto r = run({"new", "demo", "--dir", (root_ / "demo").string()});
    ::unsetenv("KEEL_ADMIN_URL");
    EXPECT_EQ(r.code, 0) << r.err;
}

TEST(new_project_templates, every_file_in_templates_is_embedded_as_it_is) {
    std::map<std::string, std::string> embedded;
    for (const auto& t : project_templates()) embedded[std::string(t.name)] = t.body;
    std::map<std::string, std::string> on_disk;
    for (const auto& entry : fs::directory_iterator(KEEL_TEMPLATES_DIR))
        on_disk[entry.path().filename().string()] = read(entry.path());
    EXPECT_EQ(embedded, on_disk);
}

TEST(new_project_templates, render_replaces_the_name_and_the_namespace) {
    EXPECT_EQ(render_template("@name@ @namespace@::x @name@", "my-svc"), "my-svc my_svc::x my-svc");
    EXPECT_EQ(render_template("no placeholder", "demo"), "no placeholder");
}

}  // namespace
}  // namespace keel::cli
