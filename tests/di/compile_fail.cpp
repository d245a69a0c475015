// Declarations keel::di rejects at compile time. Built by ctest once per KEEL_DI_CASE with
// -fsyntax-only; each case must fail with the static_assert message listed in
// CMakeLists.txt. Case 0 is the control: correct declarations that must compile.

#include <keel/di/container.hpp>
#include <memory>

namespace {

struct dep {};
struct by_value {
    using inject = keel::di::inject<dep>;  // not a reference
    explicit by_value(dep) {}
};
struct needs_args {
    explicit needs_args(int) {}
};
struct interface {
    virtual ~interface() = default;
    virtual void run() = 0;
};
struct unrelated {};
struct takes_scope {
    using inject = keel::di::inject<keel::di::scope&>;
    explicit takes_scope(keel::di::scope&) {}
};
struct good {
    using inject = keel::di::inject<dep&, const dep&>;
    good(dep&, const dep&) {}
};
struct wrong_inject {
    using inject = keel::di::inject<dep&>;
    wrong_inject(dep&, int) {}
};
struct impl : interface {
    void run() override {}
};

[[maybe_unused]] void declare(keel::di::registry& reg) {
#if KEEL_DI_CASE == 0
    reg.singleton<dep>().singleton<good>().singleton<interface, impl>();
    reg.per_request<takes_scope>();
    reg.singleton<int>([](dep&) { return 1; });
    reg.per_request<unrelated>([](keel::di::scope&) { return std::make_shared<unrelated>(); });
    reg.instance(std::make_shared<needs_args>(1));
#elif KEEL_DI_CASE == 1
    reg.singleton<by_value>();
#elif KEEL_DI_CASE == 2
    reg.singleton<needs_args>();
#elif KEEL_DI_CASE == 3
    reg.singleton<interface, unrelated>();
#elif KEEL_DI_CASE == 4
    reg.singleton<dep>([]() { return new dep{}; });
#elif KEEL_DI_CASE == 5
    reg.singleton<good>([](dep d) { return good(d, d); });
#elif KEEL_DI_CASE == 6
    reg.singleton<dep>([](auto&) { return dep{}; });
#elif KEEL_DI_CASE == 7
    reg.singleton<takes_scope>();
#elif KEEL_DI_CASE == 8
    reg.singleton<interface>();
#elif KEEL_DI_CASE == 9
    reg.singleton<dep>(std::make_shared<dep>());
#elif KEEL_DI_CASE == 10
    reg.singleton<dep>().singleton<wrong_inject>();
#endif
}

}  // namespace
