// build() finds every wrong registration before anything is constructed, and names the
// types involved.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <keel/di/container.hpp>
#include <string>

namespace di_test {

struct order_repository {};

struct order_controller {
    using inject = keel::di::inject<order_repository&>;
    explicit order_controller(order_repository&) {}
};

struct cycle_c;
struct cycle_a {
    using inject = keel::di::inject<cycle_c&>;
    explicit cycle_a(cycle_c&) {}
};
struct cycle_b {
    using inject = keel::di::inject<cycle_a&>;
    explicit cycle_b(cycle_a&) {}
};
struct cycle_c {
    using inject = keel::di::inject<cycle_b&>;
    explicit cycle_c(cycle_b&) {}
};

struct self_loop {
    using inject = keel::di::inject<self_loop&>;
    explicit self_loop(self_loop&) {}
};

struct request_state {};

struct cache {
    using inject = keel::di::inject<request_state&>;
    explicit cache(request_state&) {}
};

struct needs_scope {
    explicit needs_scope(keel::di::scope&) {}
};

}  // namespace di_test

namespace {

using namespace di_test;
using ::testing::HasSubstr;

std::string build_error(const keel::di::registry& reg) {
    try {
        (void)reg.build();
    } catch (const keel::di::error& e) {
        return e.what();
    }
    ADD_FAILURE() << "build() accepted the registrations";
    return {};
}

TEST(di_validation, names_a_missing_dependency_and_who_needs_it) {
    keel::di::registry reg;
    reg.singleton<order_controller>();
    EXPECT_EQ(build_error(reg),
              "missing dependency: di_test::order_controller needs di_test::order_repository, "
              "which is not registered");
}

TEST(di_validation, names_the_cycle_path) {
    keel::di::registry reg;
    reg.singleton<cycle_a>().singleton<cycle_b>().singleton<cycle_c>();
    EXPECT_EQ(build_error(reg),
              "dependency cycle: di_test::cycle_a -> di_test::cycle_c -> di_test::cycle_b -> "
              "di_test::cycle_a");
}

TEST(di_validation, finds_a_type_that_depends_on_itself) {
    keel::di::registry reg;
    reg.per_request<self_loop>();
    EXPECT_EQ(build_error(reg), "dependency cycle: di_test::self_loop -> di_test::self_loop");
}

TEST(di_validation, refuses_a_singleton_that_depends_on_a_per_request_type) {
    keel::di::registry reg;
    reg.per_request<request_state>().singleton<cache>();
    EXPECT_THAT(build_error(reg),
                HasSubstr("lifetime mismatch: singleton di_test::cache depends on per-request "
                          "di_test::request_state"));
}

TEST(di_validation, refuses_a_replaced_singleton_that_depends_on_the_scope) {
    keel::di::registry reg;
    reg.singleton<needs_scope>(
        [](keel::di::container&) -> std::unique_ptr<needs_scope> { return nullptr; });
    reg.replace<needs_scope>([](keel::di::scope& s) { return std::make_unique<needs_scope>(s); });
    EXPECT_THAT(build_error(reg),
                HasSubstr("lifetime mismatch: singleton di_test::needs_scope depends on "
                          "keel::di::scope"));
}

TEST(di_validation, reports_every_problem_at_once) {
    keel::di::registry reg;
    reg.singleton<order_controller>()
        .singleton<cycle_a>()
        .singleton<cycle_b>()
        .singleton<cycle_c>()
        .per_request<request_state>()
        .singleton<cache>()
        .singleton<cache>()
        .replace<order_repository>(std::make_shared<order_repository>());
    std::string text = build_error(reg);
    EXPECT_THAT(text, HasSubstr("5 problems in the registrations:"));
    EXPECT_THAT(text, HasSubstr("duplicate registration: di_test::cache is registered twice"));
    EXPECT_THAT(text, HasSubstr("replace: di_test::order_repository is not registered"));
    EXPECT_THAT(text, HasSubstr("missing dependency: di_test::order_controller needs "
                                "di_test::order_repository"));
    EXPECT_THAT(text, HasSubstr("dependency cycle: di_test::cycle_a -> "));
    EXPECT_THAT(text, HasSubstr("lifetime mismatch: singleton di_test::cache"));
}

TEST(di_validation, refuses_a_null_instance) {
    keel::di::registry reg;
    reg.instance(std::shared_ptr<order_repository>());
    EXPECT_EQ(build_error(reg),
              "null instance: di_test::order_repository is registered with a null pointer");
}

TEST(di_validation, nothing_is_constructed_when_validation_fails) {
    static int constructed = 0;
    struct probe {
        probe() { ++constructed; }
    };
    keel::di::registry reg;
    reg.singleton<probe>().singleton<order_controller>();
    build_error(reg);
    EXPECT_EQ(constructed, 0);
    reg.singleton<order_repository>();
    (void)reg.build();
    EXPECT_EQ(constructed, 1);
}

TEST(di_validation, a_factory_resolving_itself_through_the_container_is_a_cycle) {
    keel::di::registry reg;
    reg.singleton<order_repository>([](keel::di::container& c) {
        return std::make_shared<order_repository>(c.get<order_repository>());
    });
    EXPECT_THAT(build_error(reg), HasSubstr("dependency cycle: di_test::order_repository is "
                                            "resolved while it is being constructed"));
}

}  // namespace
