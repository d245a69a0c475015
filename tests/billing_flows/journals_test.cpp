// keel-billing's recorded journals: journals of its flows, kept in tests/billing_flows/
// journals/, replayed against today's code. A change to the subscription, invoice or report
// flow that would park instances in flight (an operation added, removed, renamed or
// reordered without ctx.patched) fails here.
//
// The journals are recorded by this test: KEEL_RECORD_JOURNALS=1 runs each flow in the test
// environment (the fake provider answering the charges, as the service's ctx.http calls are
// journaled as run steps of the same names) and writes its journal in the format of
// `keel journal ID --json` instead of replaying it. Record again only for a new case, never
// to make a failing replay pass: the old journals are what instances in production have.

#include <cstdlib>
#include <fstream>
#include <keel/process/testing/replay.hpp>

#include "flows_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using billing::subscription;

class billing_journals : public billing::test::billing_flows {
  protected:
    static bool recording() { return std::getenv("KEEL_RECORD_JOURNALS") != nullptr; }
    static std::string file(const std::string& name) {
        return std::string(KEEL_BILLING_JOURNALS) + "/" + name + ".json";
    }
    void record(const std::string& name, const std::string& id) {
        std::ofstream(file(name)) << nlohmann::json{{"entries", env().journal(id)}}.dump(2) << "\n";
    }
    nlohmann::json recorded(const std::string& name) {
        std::ifstream in(file(name));
        if (!in) throw std::runtime_error("no recorded journal " + file(name));
        return nlohmann::json::parse(in);
    }
    template <class... P>
    void expect_replays(const std::string& name, const auto& definition, const P&... params) {
        auto report = keel::process::testing::replay(definition, env(), recorded(name), params...);
        EXPECT_TRUE(report.ok()) << name << ": " << report.mismatch.value_or("");
    }
    static std::string invoice_process(const std::string& sub, std::int64_t period) {
        return billing::invoicing.instance_id(keel::ref<subscription>(sub), period);
    }
};

TEST_F(billing_journals, a_subscription_paid_and_waiting_for_its_period_end) {
    keel::ref<subscription> s("s-1");
    if (recording()) {
        auto flow = subscribe("s-1", "basic", "ok");
        pass(24h);
        record("subscription-paid", flow);
        return record("invoice-paid", invoice_process("s-1", 1));
    }
    expect_replays("subscription-paid", billing::subscribing, s);
    expect_replays("invoice-paid", billing::invoicing, s, std::int64_t{1});
}

TEST_F(billing_journals, an_invoice_paid_on_the_third_attempt_after_dunning) {
    keel::ref<subscription> s("s-3");
    if (recording()) {
        subscribe("s-3", "pro", "declined-twice");
        pass(24h * 5);
        return record("invoice-dunning-paid", invoice_process("s-3", 1));
    }
    expect_replays("invoice-dunning-paid", billing::invoicing, s, std::int64_t{1});
}

TEST_F(billing_journals, a_pending_charge_paid_by_the_providers_webhook) {
    keel::ref<subscription> s("s-4");
    if (recording()) {
        subscribe("s-4", "basic", "pending");
        auto i = invoice("s-4", 1);
        webhook(*i, i->charges.front());
        return record("invoice-pending-webhook", invoice_process("s-4", 1));
    }
    expect_replays("invoice-pending-webhook", billing::invoicing, s, std::int64_t{1});
}

TEST_F(billing_journals, a_subscription_cancelled_with_a_refund_after_a_plan_change) {
    keel::ref<subscription> s("s-5");
    if (recording()) {
        auto flow = subscribe("s-5", "basic", "ok");
        pass(24h * 10);
        EXPECT_TRUE(change_plan(flow, "pro"));
        EXPECT_TRUE(cancel(flow));
        return record("subscription-cancelled", flow);
    }
    expect_replays("subscription-cancelled", billing::subscribing, s);
}

TEST_F(billing_journals, a_daily_report) {
    std::string tick = "20191220T235500Z";
    if (recording()) {
        auto report = env().start(billing::reporting, tick);
        return record("report", report.id());
    }
    expect_replays("report", billing::reporting, tick);
}

}  // namespace
