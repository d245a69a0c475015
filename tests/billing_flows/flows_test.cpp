// keel-billing's subscription, invoice and report flows in virtual time: the service's own
// registrations (billing::add_services), its processes and its queue, with the process store
// and the documents in memory and the payment provider replaced by a fake
// (fake_provider.hpp). A year of monthly periods passes in a call.

#include "flows_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using billing::test::billing_flows;
using billing::test::options;
using keel::process::ask_error;
using keel::process::instance_status;

TEST_F(billing_flows, a_year_of_monthly_periods_pays_twelve_invoices) {
    auto flow = subscribe("s-1", "basic", "ok");
    pass(24h * 30 * 12 - 1h);  // the 13th period starts at 360 days
    for (int n = 1; n <= 12; ++n) {
        auto i = invoice("s-1", n);
        ASSERT_TRUE(i) << "period " << n;
        EXPECT_EQ(i->status, "paid") << "period " << n;
        EXPECT_EQ(i->amount, 1000);
        EXPECT_EQ(i->attempts, 1);
        EXPECT_EQ(i->charges.size(), 1u);
    }
    EXPECT_FALSE(invoice("s-1", 13));
    auto s = state(flow);
    EXPECT_EQ(s["status"], "active");
    EXPECT_EQ(s["period"], 12);
    EXPECT_EQ(s["plan"], "basic");
    EXPECT_EQ(env().status(flow), instance_status::suspended);
    // Each charge is its own step: twelve, one per invoice, each named "charge 1".
    ASSERT_EQ(provider.calls().size(), 12u);
    EXPECT_EQ(provider.calls()[11].request.reference, "s-1-12");
    EXPECT_EQ(provider.calls()[11].step, "charge 1");
}

TEST_F(billing_flows, a_card_that_succeeds_pays_the_first_invoice_at_once) {
    auto flow = subscribe("s-ok", "pro", "ok");
    auto i = invoice("s-ok", 1);
    ASSERT_TRUE(i);
    EXPECT_EQ(i->status, "paid");
    EXPECT_EQ(i->amount, 3000);
    EXPECT_EQ(i->customer, "c-1");
    EXPECT_EQ(i->paid_at, keel::format_rfc3339(env().now()));
    EXPECT_EQ(state(flow)["status"], "active");
    EXPECT_EQ(state(flow)["period"], 1);
    EXPECT_EQ(state(flow)["next_charge"], keel::format_rfc3339(env().now() + 24h * 30));
}

TEST_F(billing_flows,
       a_declined_card_fails_after_dunning_and_the_subscription_ends_with_its_period) {
    auto flow = subscribe("s-2", "basic", "declined");
    EXPECT_EQ(invoice("s-2", 1)->attempts, 1);
    EXPECT_EQ(invoice("s-2", 1)->status, "open");
    pass(24h);
    EXPECT_EQ(invoice("s-2", 1)->attempts, 2);
    pass(24h * 3);
    EXPECT_EQ(invoice("s-2", 1)->attempts, 3);
    pass(24h * 5 - 1h);
    EXPECT_EQ(invoice("s-2", 1)->attempts, 3);
    pass(1h);
    auto i = invoice("s-2", 1);
    EXPECT_EQ(i->attempts, 4);
    EXPECT_EQ(i->status, "failed");
    EXPECT_EQ(i->charges.size(), 4u);
    EXPECT_EQ(state(flow)["status"], "past_due");
    EXPECT_EQ(env().status(flow), instance_status::suspended);

    pass(24h * 21 - 1h);  // the period ends at 30 days
    EXPECT_EQ(state(flow)["status"], "past_due");
    pass(1h);
    EXPECT_EQ(state(flow)["status"], "cancelled");
    ASSERT_EQ(env().status(flow), instance_status::completed);
    auto end = env().result(keel::process::handle<billing::subscription_end>(env().engine(), flow));
    EXPECT_EQ(end->reason, "unpaid");
    EXPECT_FALSE(invoice("s-2", 2));
    // Four attempts, four steps, four keys.
    ASSERT_EQ(provider.calls().size(), 4u);
    EXPECT_EQ(provider.calls()[3].step, "charge 4");
}

TEST_F(billing_flows, a_card_declined_twice_is_paid_on_the_third_attempt_after_the_dunning_waits) {
    auto flow = subscribe("s-3", "pro", "declined-twice");
    pass(24h);
    EXPECT_EQ(invoice("s-3", 1)->attempts, 2);
    EXPECT_EQ(invoice("s-3", 1)->status, "open");
    EXPECT_EQ(state(flow)["status"], "active");  // no trial: active until a bill fails
    pass(24h * 3);
    auto i = invoice("s-3", 1);
    EXPECT_EQ(i->attempts, 3);
    EXPECT_EQ(i->status, "paid");
    EXPECT_EQ(i->charges, (std::vector<std::string>{"ch_s-3-1_1", "ch_s-3-1_2", "ch_s-3-1_3"}));
    EXPECT_EQ(state(flow)["status"], "active");
    pass(24h * 26);
    EXPECT_EQ(invoice("s-3", 2)->status, "open");  // a fresh invoice, declined at its first
    EXPECT_EQ(invoice("s-3", 2)->attempts, 1);
    EXPECT_EQ(provider.calls().back().step, "charge 1");
}

TEST_F(billing_flows, a_pending_charge_is_paid_by_the_providers_webhook) {
    auto flow = subscribe("s-4", "basic", "pending");
    auto i = invoice("s-4", 1);
    ASSERT_EQ(i->charges.size(), 1u);
    EXPECT_EQ(i->status, "open");
    pass(30min);
    auto first = webhook(*i, i->charges[0]);
    EXPECT_EQ(first.result, keel::process::delivery::outcome::stored);
    EXPECT_EQ(invoice("s-4", 1)->status, "paid");
    EXPECT_EQ(state(flow)["status"], "active");
    auto again = webhook(*i, i->charges[0]);  // the provider retries: a duplicate
    EXPECT_NE(again.result, keel::process::delivery::outcome::stored);
}

TEST_F(billing_flows, a_pending_charge_without_its_webhook_counts_as_declined_and_dunning_goes_on) {
    subscribe("s-5", "basic", "pending");
    pass(1h);
    EXPECT_EQ(invoice("s-5", 1)->attempts, 1);
    pass(24h);
    auto i = invoice("s-5", 1);
    EXPECT_EQ(i->attempts, 2);
    // The first charge's webhook arrives late, during the next wait: it pays the invoice.
    webhook(*i, i->charges[0]);
    EXPECT_EQ(invoice("s-5", 1)->status, "paid");
}

TEST_F(billing_flows, a_customers_invoices_are_charged_one_at_a_time) {
    auto a = subscribe("s-6", "basic", "pending", "c-9");
    auto b = subscribe("s-7", "basic", "ok", "c-9");
    EXPECT_EQ(invoice("s-6", 1)->attempts, 1);
    EXPECT_EQ(invoice("s-7", 1)->attempts, 0);  // queued behind s-6's charge
    EXPECT_EQ(invoice("s-7", 1)->status, "open");
    webhook(*invoice("s-6", 1), invoice("s-6", 1)->charges[0]);
    env().advance(1s);  // the queue admits the next
    EXPECT_EQ(invoice("s-7", 1)->status, "paid");
    EXPECT_EQ(state(a)["status"], "active");
    EXPECT_EQ(state(b)["status"], "active");
}

TEST_F(billing_flows, cancel_refunds_the_unused_part_of_a_paid_period_in_exact_cents) {
    auto flow = subscribe("s-8", "pro", "ok");
    pass(24h * 10);
    auto answer = cancel(flow);
    ASSERT_TRUE(answer) << answer.error().message;
    EXPECT_EQ(*answer, (nlohmann::json{{"status", "cancelled"}, {"refund", 2000}}));
    EXPECT_EQ(env().status(flow), instance_status::completed);
    EXPECT_EQ(state(flow)["status"], "cancelled");
    pass(24h * 30);
    EXPECT_FALSE(invoice("s-8", 2));  // nothing billed after the cancel
}

TEST_F(billing_flows, a_refund_is_rounded_down) {
    auto flow = subscribe("s-9", "basic", "ok");
    pass(24h * 10 + 1h);  // 479 of 720 hours left: 665.27 cents
    auto answer = cancel(flow);
    ASSERT_TRUE(answer);
    EXPECT_EQ((*answer)["refund"], 665);
}

TEST_F(billing_flows, a_second_cancel_finds_the_subscription_ended) {
    auto flow = subscribe("s-10", "basic", "ok");
    ASSERT_TRUE(cancel(flow));
    auto second = cancel(flow);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error().why, ask_error::reason::final);
    EXPECT_EQ(keel::process::http_status(second.error()), 409);
}

TEST_F(billing_flows, cancel_with_the_invoice_unpaid_refunds_nothing_and_voids_it) {
    auto flow = subscribe("s-11", "basic", "declined");
    pass(24h * 2);
    auto answer = cancel(flow);
    ASSERT_TRUE(answer);
    EXPECT_EQ((*answer)["refund"], 0);
    EXPECT_EQ(invoice("s-11", 1)->status, "void");
    EXPECT_EQ(env().status(flow), instance_status::completed);
    auto child =
        billing::invoicing.instance_id(keel::ref<billing::subscription>("s-11"), std::int64_t{1});
    EXPECT_EQ(env().status(child), instance_status::cancelled);  // parent_close::cancel
}

TEST_F(billing_flows, a_plan_change_takes_effect_in_the_next_period) {
    auto flow = subscribe("s-12", "basic", "ok");
    pass(24h * 5);
    auto answer = change_plan(flow, "pro");
    ASSERT_TRUE(answer) << answer.error().message;
    EXPECT_EQ(*answer, (nlohmann::json{{"plan", "pro"}, {"effective_period", 2}}));
    EXPECT_EQ(state(flow)["plan"], "basic");
    EXPECT_EQ(state(flow)["next_plan"], "pro");
    EXPECT_EQ(invoice("s-12", 1)->amount, 1000);
    pass(24h * 25);
    EXPECT_EQ(invoice("s-12", 2)->amount, 3000);
    EXPECT_EQ(invoice("s-12", 2)->status, "paid");
    EXPECT_EQ(state(flow)["plan"], "pro");
    EXPECT_TRUE(state(flow)["next_plan"].is_null());
}

TEST_F(billing_flows, the_same_plan_is_refused) {
    auto flow = subscribe("s-13", "basic", "ok");
    auto same = change_plan(flow, "basic");
    ASSERT_FALSE(same);
    EXPECT_EQ(same.error().why, ask_error::reason::refused);
    ASSERT_TRUE(change_plan(flow, "pro"));
    auto again = change_plan(flow, "pro");  // already the next period's plan
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().why, ask_error::reason::refused);
    EXPECT_EQ(env().status(flow), instance_status::suspended);  // and it goes on
}

TEST_F(billing_flows, a_cancelled_subscription_refuses_a_plan_change_as_final) {
    auto flow = subscribe("s-14", "basic", "ok");
    ASSERT_TRUE(cancel(flow));
    auto change = change_plan(flow, "pro");
    ASSERT_FALSE(change);
    EXPECT_EQ(change.error().why, ask_error::reason::final);
}

class billing_trial : public billing_flows {
  protected:
    void SetUp() override { configure({.trial = 24h * 14}); }
};

TEST_F(billing_trial, cancel_during_the_trial_refunds_nothing) {
    auto flow = subscribe("t-1", "pro", "ok");
    EXPECT_EQ(state(flow)["status"], "trialing");
    EXPECT_EQ(state(flow)["period"], 0);
    pass(24h * 3);
    EXPECT_FALSE(invoice("t-1", 1));
    auto answer = cancel(flow);
    ASSERT_TRUE(answer);
    EXPECT_EQ(*answer, (nlohmann::json{{"status", "cancelled"}, {"refund", 0}}));
    EXPECT_EQ(env().status(flow), instance_status::completed);
    EXPECT_TRUE(provider.calls().empty());
}

TEST_F(billing_trial, the_first_period_starts_when_the_trial_ends) {
    auto flow = subscribe("t-2", "basic", "ok");
    ASSERT_TRUE(change_plan(flow, "pro"));  // in the trial: from period 1 on
    pass(24h * 14 - 1h);
    EXPECT_FALSE(invoice("t-2", 1));
    pass(1h);
    ASSERT_TRUE(invoice("t-2", 1));
    EXPECT_EQ(invoice("t-2", 1)->amount, 3000);
    EXPECT_EQ(invoice("t-2", 1)->status, "paid");
    EXPECT_EQ(state(flow)["status"], "active");
}

TEST_F(billing_flows, the_report_records_the_invoices_paid_on_the_day_of_its_tick) {
    // The clock starts at midnight UTC, 2019-12-20.
    auto day = billing::utc_date(env().now());
    ASSERT_EQ(day, "2019-12-20");
    subscribe("r-1", "basic", "ok");
    env().run(billing::schedule_report(env().engine(), "0 55 23 * * *"));
    subscribe("r-2", "pro", "ok", "c-2");
    pass(12h);
    subscribe("r-3", "pro", "pending", "c-3");  // paid after the tick: not in the report
    pass(12h);
    auto& reports = env().get<billing::report_book>().reports();
    auto got = env().run(reports.get(keel::ref<billing::report>(day)));
    ASSERT_TRUE(got && *got);
    EXPECT_EQ((*got)->paid_invoices, 2);
    EXPECT_EQ((*got)->revenue, 4000);
    EXPECT_EQ((*got)->at, "2019-12-20T23:55:00.000Z");
    EXPECT_FALSE(env().run(reports.get(keel::ref<billing::report>("2019-12-21"))).value());
}

TEST_F(billing_flows, a_later_tick_of_the_same_day_replaces_the_report) {
    subscribe("r-4", "basic", "ok");
    pass(6h);
    env().start(billing::reporting, std::string("20191220T050000Z"));
    subscribe("r-5", "pro", "ok", "c-5");
    env().start(billing::reporting, std::string("20191220T070000Z"));
    auto& reports = env().get<billing::report_book>().reports();
    auto got = env().run(reports.get(keel::ref<billing::report>("2019-12-20")));
    ASSERT_TRUE(got && *got);
    EXPECT_EQ((*got)->paid_invoices, 2);
    EXPECT_EQ((*got)->revenue, 4000);
    EXPECT_EQ((*got)->at, "2019-12-20T07:00:00.000Z");
    // An earlier tick run late does not replace a later one's report.
    env().start(billing::reporting, std::string("20191220T060000Z"));
    got = env().run(reports.get(keel::ref<billing::report>("2019-12-20")));
    EXPECT_EQ((*got)->at, "2019-12-20T07:00:00.000Z");
}

}  // namespace
