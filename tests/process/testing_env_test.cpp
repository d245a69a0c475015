// keel::process::testing::environment as a user's test would use it: the service's own
// registrations with one replaced by a fake, typed start and emit, virtual days, and the
// instance's status, result and journal.

#include <gtest/gtest.h>

#include <keel/process/context.hpp>
#include <keel/process/testing.hpp>
#include <stdexcept>

namespace {

namespace asio = boost::asio;
using keel::process::instance_status;
using keel::process::testing::environment;

struct account {
    static constexpr std::string_view model_name = "account";
};

struct billing_signals : keel::signal_group {
    keel::signal<int, account> topped_up{this, "/account/:account/topped-up"};
};

struct gateway {
    virtual ~gateway() = default;
    virtual asio::awaitable<int> charge(int cents) = 0;
};
struct bank_gateway final : gateway {
    asio::awaitable<int> charge(int) override {
        throw std::logic_error("a test must not call the bank");
        co_return 0;
    }
};
struct fake_gateway final : gateway {
    std::vector<int> charged;
    asio::awaitable<int> charge(int cents) override {
        charged.push_back(cents);
        co_return cents;
    }
};

keel::process::durable<std::string> bill(keel::process::context& ctx, keel::ref<account>,
                                         billing_signals& signals, gateway& bank) {
    auto first = co_await ctx.race(signals.topped_up, ctx.timer(std::chrono::hours(72), "grace"));
    if (!first.is(signals.topped_up)) co_return "expired";
    int cents = first.get(signals.topped_up);
    co_await ctx.run("charge", [&] { return bank.charge(cents); });
    co_return "charged " + std::to_string(cents);
}
inline const auto billing = keel::process::define<bill>("/account/:account/billing");

// The service's registrations, as its main would give them to the application.
void add_services(keel::di::registry& r) {
    r.singleton<gateway, bank_gateway>();
}

TEST(process_testing, runs_a_flow_with_a_fake_and_typed_signals) {
    fake_gateway fake;
    environment env(add_services);
    env.replace<gateway>(std::ref(fake)).signals<billing_signals>().processes(billing);
    keel::ref<account> acme("acme");
    auto h = env.start(billing, acme);
    EXPECT_EQ(env.status(h), instance_status::suspended);
    EXPECT_EQ(env.result(h), std::nullopt);

    auto sent = env.emit(env.get<billing_signals>().topped_up, acme, 500);
    EXPECT_EQ(sent.reached, 1u);
    EXPECT_EQ(env.status(h), instance_status::completed);
    EXPECT_EQ(env.result(h), "charged 500");
    EXPECT_EQ(fake.charged, std::vector<int>{500});
    auto journal = env.journal(h);
    ASSERT_FALSE(journal.empty());
    EXPECT_EQ(journal.back().name, "charge");

    nlohmann::json shown = env.run(env.engine().describe(h.id())).value();
    EXPECT_EQ(shown, (nlohmann::json{{"id", "account/acme/billing"},
                                     {"definition", "/account/:account/billing"},
                                     {"status", "completed"},
                                     {"result", "charged 500"},
                                     {"error", nullptr}}));
}

TEST(process_testing, days_pass_in_virtual_time) {
    fake_gateway fake;
    environment env(add_services);
    env.replace<gateway>(std::ref(fake)).signals<billing_signals>().processes(billing);
    auto start = env.now();
    auto h = env.start(billing, keel::ref<account>("acme"));
    env.advance(std::chrono::hours(71));
    EXPECT_EQ(env.status(h), instance_status::suspended);
    env.advance(std::chrono::hours(1));
    EXPECT_EQ(env.status(h), instance_status::completed);
    EXPECT_EQ(env.result(h), "expired");
    EXPECT_EQ(env.now() - start, std::chrono::hours(72));
    EXPECT_TRUE(fake.charged.empty());
}

TEST(process_testing, registrations_come_before_the_first_start) {
    fake_gateway fake;
    environment env(add_services);
    env.replace<gateway>(std::ref(fake)).signals<billing_signals>().processes(billing);
    env.start(billing, keel::ref<account>("acme"));
    EXPECT_THROW(env.replace<gateway>(std::ref(fake)), std::logic_error);
    EXPECT_THROW(env.processes(billing), std::logic_error);
}

TEST(process_testing, without_the_fake_the_service_registration_is_used) {
    environment env(add_services);
    env.signals<billing_signals>().processes(billing);
    keel::ref<account> acme("acme");
    auto h = env.start(billing, acme);
    env.emit(env.get<billing_signals>().topped_up, acme, 1);
    env.advance(std::chrono::minutes(10));  // the step's three attempts, each at its time
    EXPECT_EQ(env.status(h), instance_status::failed);
    EXPECT_NE(env.error(h.id()).value_or("").find("a test must not call the bank"),
              std::string::npos)
        << env.error(h.id()).value_or("");
}

TEST(process_testing, a_handler_dependency_that_is_not_registered_fails_the_build) {
    environment env;  // no services: the gateway billing needs is missing
    env.signals<billing_signals>().processes(billing);
    try {
        env.start(billing, keel::ref<account>("acme"));
        FAIL() << "start() built a graph without the handler's gateway";
    } catch (const keel::di::error& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("handler_dependencies"), std::string::npos) << what;
        EXPECT_NE(what.find("gateway"), std::string::npos) << what;
    }
    EXPECT_EQ(env.store().size(), 0u);  // nothing started
}

TEST(process_testing, a_call_that_waits_for_time_says_so) {
    fake_gateway fake;
    environment env(add_services);
    env.replace<gateway>(std::ref(fake)).signals<billing_signals>().processes(billing);
    auto h = env.start(billing, keel::ref<account>("acme"));
    EXPECT_THROW(env.run(h.wait()), std::logic_error);  // 72 h not yet passed
    env.advance(std::chrono::hours(72));
    EXPECT_EQ(env.status(h), instance_status::completed);
}

// Three naps of a day, each followed by a look at the clock.
keel::process::durable<std::vector<std::int64_t>> napping(keel::process::context& ctx,
                                                          keel::ref<account>) {
    std::vector<std::int64_t> seen;
    for (int i = 0; i < 3; ++i) {
        co_await ctx.sleep(std::chrono::hours(24), "nap");
        auto now = co_await ctx.now();
        seen.push_back(
            std::chrono::duration_cast<std::chrono::hours>(now.time_since_epoch()).count());
    }
    co_return seen;
}
inline const auto naps = keel::process::define<napping>("/account/:account/naps");

TEST(process_testing, an_advance_runs_each_timer_at_its_own_time) {
    environment env;
    env.processes(naps);
    auto h = env.start(naps, keel::ref<account>("a-1"));
    auto start = std::chrono::duration_cast<std::chrono::hours>(env.now().time_since_epoch());
    env.advance(std::chrono::days(5));
    auto seen = env.result(h);
    ASSERT_TRUE(seen);
    EXPECT_EQ(*seen, (std::vector<std::int64_t>{start.count() + 24, start.count() + 48,
                                                start.count() + 72}));
    EXPECT_EQ(env.now().time_since_epoch(),
              std::chrono::duration_cast<keel::duration>(start + std::chrono::days(5)));
}

}  // namespace
