#pragma once

// The billing flows' test fixture: keel-billing's registrations in the process test
// environment (virtual time, in-memory store and documents) with the payment provider
// replaced by a fake, and helpers that do what its controllers do (subscribe, ask, deliver
// the provider's webhook). Used by flows_test.cpp and journals_test.cpp.

#include <gtest/gtest.h>

#include <keel/framework/rfc3339.hpp>
#include <keel/process/testing.hpp>

#include "fake_provider.hpp"
#include "service.hpp"

namespace billing::test {

using namespace std::chrono_literals;
using keel::process::ask_error;
using keel::process::instance_status;

struct options {
    keel::duration trial = 0s;
    std::string dunning = "1d,3d,5d";
};

class billing_flows : public ::testing::Test {
  protected:
    void SetUp() override { configure({}); }

    // The environment as the service has it, with these terms (once per test, before the
    // first start).
    void configure(const options& o) {
        env_.emplace(billing::add_services);
        auto s = std::make_shared<billing::settings>();
        s->period = 24h * 30;
        s->trial = o.trial;
        s->dunning = o.dunning;
        env_->services([s](keel::di::registry& r) { r.instance(s); });
        env_->replace<billing::payment_provider>(
            std::ref(static_cast<billing::payment_provider&>(provider)));
        billing::add_durable(*env_);
        billing::add_queues(env_->engine());
    }
    keel::process::testing::environment& env() { return *env_; }

    // A customer and a subscription as POST /customers and POST /subscriptions write them,
    // and its process started.
    std::string subscribe(const std::string& id, const std::string& plan, const std::string& card,
                          const std::string& customer = "c-1") {
        auto& customers = env().get<billing::customer_book>().repository();
        billing::customer c{.id = customer, .email = customer + "@example.com"};
        EXPECT_TRUE(env().run(customers.put(keel::ref<billing::customer>(customer), c)));
        auto& subs = env().get<billing::subscription_book>().repository();
        billing::subscription s{.id = id,
                                .customer = customer,
                                .plan = plan,
                                .card = card,
                                .created = keel::format_rfc3339(env().now())};
        EXPECT_TRUE(env().run(subs.put(keel::ref<billing::subscription>(id), s)));
        auto flow = env().start(billing::subscribing, keel::ref<billing::subscription>(id));
        return flow.id();
    }

    // Moves virtual time forward an hour at a time, so that the flows see each timer about
    // when it is due (ctx.now() within the hour).
    void pass(keel::duration d) {
        auto step = std::chrono::duration_cast<keel::duration>(1h);
        while (d > step) {
            env().advance(step);
            d -= step;
        }
        env().advance(d);
    }

    std::optional<billing::invoice> invoice(const std::string& sub, std::int64_t period) {
        auto& book = env().get<billing::invoice_book>().repository();
        auto got =
            env().run(book.get(keel::ref<billing::invoice>(billing::invoice_id(sub, period))));
        if (!got) throw std::runtime_error(got.error().what());
        return *got;
    }
    nlohmann::json state(const std::string& process) {
        auto got = env().run(env().engine().published(process, "subscription"));
        return got.value_or(nlohmann::json());
    }
    keel::expected<nlohmann::json, ask_error> ask(const std::string& process, std::string_view path,
                                                  nlohmann::json body) {
        keel::process::ask_options once{.timeout = 5s, .id = {}};
        return env().run(env().engine().ask(process, std::string(path), std::move(body), once));
    }
    keel::expected<nlohmann::json, ask_error> cancel(const std::string& process) {
        return ask(process, billing::cancel_path, nlohmann::json::object());
    }
    keel::expected<nlohmann::json, ask_error> change_plan(const std::string& process,
                                                          const std::string& plan) {
        return ask(process, billing::plan_path, nlohmann::json{{"plan", plan}});
    }
    // The provider's webhook, as the webhook controller delivers it.
    keel::process::delivery webhook(const billing::invoice& i, const std::string& charge) {
        auto process = billing::invoicing.instance_id(
            keel::ref<billing::subscription>(i.subscription), i.period);
        billing::provider_event event{
            .type = "charge.succeeded", .charge = charge, .reference = i.id};
        return env().run(env().engine().deliver(process, std::string(billing::charge_event_path),
                                                nlohmann::json(event), charge));
    }

    billing::test::fake_provider provider;
    std::optional<keel::process::testing::environment> env_;
};

}  // namespace billing::test
