// Signal declarations and emits that must not compile. Built by ctest once per
// KEEL_SIGNALS_CASE with -fsyntax-only; each case must fail with the message listed in
// CMakeLists.txt. Case 0 is the control: correct code that must compile.

#include <keel/signals/signal.hpp>

namespace {

struct order {
    static constexpr std::string_view model_name = "order";
};
struct user {
    static constexpr std::string_view model_name = "user";
};
struct paid {
    double amount = 0;
};
void to_json(nlohmann::json& j, const paid& p) {
    j = {{"amount", p.amount}};
}
void from_json(const nlohmann::json& j, paid& p) {
    j.at("amount").get_to(p.amount);
}

struct signals : keel::signal_group {
#if KEEL_SIGNALS_CASE == 1
    keel::signal<paid, order, user> received{this, "/payment/:order/received"};
#elif KEEL_SIGNALS_CASE == 2
    keel::signal<paid, order> received{this, "payment/:order/received"};
#elif KEEL_SIGNALS_CASE == 3
    keel::signal<paid, order> received{this, "/payment//:order"};
#else
    keel::signal<paid, order> received{this, "/payment/:order/received"};
#endif
    keel::signal<void, order> failed{this, "/payment/:order/failed"};
};

[[maybe_unused]] void emit(signals& s) {
    keel::ref<order> o("o-1");
    keel::ref<user> u("u-1");
    paid p{1.0};
    keel::signals::emit_options once{.key = "k"};
#if KEEL_SIGNALS_CASE == 0
    (void)s.received.emit(o, p);
    (void)s.received.emit(o, p, once);
    (void)s.failed.emit(o);
    (void)s.failed.emit(o, once);
#elif KEEL_SIGNALS_CASE == 4
    (void)s.received.emit(u, p);  // a user where the signal takes an order
#elif KEEL_SIGNALS_CASE == 5
    (void)s.received.emit(o);  // the payload is missing
#elif KEEL_SIGNALS_CASE == 6
    (void)s.failed.emit(o, p);  // a payload for a signal without one
#endif
    (void)u;
    (void)p;
    (void)once;
}

}  // namespace
