// keel-billing's pure pieces: the dunning list, the refund's rounding, dates and ticks, the
// plans, and how the provider's answers are read.

#include <gtest/gtest.h>

#include "processes.hpp"
#include "provider.hpp"
#include "service.hpp"

namespace {

using namespace std::chrono_literals;

TEST(billing_domain, the_dunning_list_reads_durations) {
    auto waits = billing::parse_dunning("1d,3d,5d");
    ASSERT_EQ(waits.size(), 3u);
    EXPECT_EQ(waits[0], std::chrono::duration_cast<keel::duration>(24h));
    EXPECT_EQ(waits[2], std::chrono::duration_cast<keel::duration>(24h * 5));
    EXPECT_TRUE(billing::parse_dunning("").empty());
    EXPECT_EQ(billing::parse_dunning("90s").size(), 1u);
}

// The option the service's own checks refuse among `args` (every other option valid), as
// the application asks before anything starts; nullopt when they all pass.
std::optional<keel::app::refused_setting> refused_with(std::vector<std::string_view> args) {
    keel::app::settings_schema<billing::settings> settings;
    billing::declare_settings(settings);
    keel::config::schema schema;
    settings.declare(schema);
    std::vector<std::string_view> all = {"--provider-url", "https://127.0.0.1:8443",
                                         "--provider-secret", "s3cret"};
    all.insert(all.end(), args.begin(), args.end());
    auto values = keel::config::load(schema, all, keel::config::environment{});
    if (!values) throw std::runtime_error(values.error().what());
    return settings.refused(*values);
}

TEST(billing_settings, bad_values_are_refused_at_start_naming_the_option) {
    EXPECT_FALSE(refused_with({})) << "the defaults and the two required options pass";
    for (const char* bad : {"1d,,3d", "1d,x", "soon", "1d,", "0s"}) {
        auto r = refused_with({"--dunning", bad});
        ASSERT_TRUE(r) << bad << " was accepted";
        EXPECT_EQ(r->name, "dunning") << bad;
    }
    auto cron = refused_with({"--report-cron", "0 55 23 * *"});
    ASSERT_TRUE(cron);
    EXPECT_EQ(cron->name, "report_cron");
    EXPECT_NE(cron->reason.find("six fields"), std::string::npos) << cron->reason;
    auto url = refused_with({"--provider-url", "ftp://example.com"});
    ASSERT_TRUE(url);
    EXPECT_EQ(url->name, "provider_url");
    auto secret = refused_with({"--provider-secret", ""});
    ASSERT_TRUE(secret);
    EXPECT_EQ(secret->name, "provider_secret");
}

TEST(billing_domain, a_refund_is_the_unused_fraction_rounded_down) {
    auto month = std::chrono::duration_cast<keel::duration>(24h * 30);
    EXPECT_EQ(billing::prorate(3000, 24h * 20, month), 2000);
    EXPECT_EQ(billing::prorate(1000, 479h, month), 665);
    EXPECT_EQ(billing::prorate(1000, 0s, month), 0);
    EXPECT_EQ(billing::prorate(1000, -5s, month), 0);
    EXPECT_EQ(billing::prorate(1000, month + 1s, month), 1000);
}

TEST(billing_domain, dates_and_ticks) {
    auto t = billing::tick_time("20261129T235500Z");
    EXPECT_EQ(billing::utc_date(t), "2026-11-29");
    EXPECT_EQ(billing::utc_date(t + 5min), "2026-11-30");
    EXPECT_THROW(billing::tick_time("2026-11-29"), std::invalid_argument);
    EXPECT_TRUE(billing::is_date("2024-02-29"));
    EXPECT_FALSE(billing::is_date("2023-02-29"));
    EXPECT_FALSE(billing::is_date("2023-2-28"));
    EXPECT_FALSE(billing::is_date("today"));
}

TEST(billing_domain, plans) {
    EXPECT_EQ(billing::plan_price("basic"), 1000);
    EXPECT_EQ(billing::plan_price("pro"), 3000);
    EXPECT_EQ(billing::plan_price("gold"), std::nullopt);
}

TEST(billing_domain, the_providers_answers) {
    auto ok =
        billing::read_charge(201, R"({"id":"ch_1","status":"succeeded","reference":"s-1-1"})");
    EXPECT_EQ(ok.id, "ch_1");
    EXPECT_EQ(ok.status, "succeeded");
    EXPECT_EQ(billing::read_charge(200, R"({"id":"ch_1","status":"pending"})").status, "pending");
    EXPECT_EQ(billing::read_charge(429, "").status, "error");
    EXPECT_EQ(billing::read_charge(201, "not json").status, "error");
    EXPECT_EQ(billing::read_charge(201, R"({"id":"ch_1","status":"odd"})").status, "error");
}

TEST(billing_domain, the_ledger_takes_an_invoice_once) {
    billing::add_paid add{
        .date = "2026-11-29",
        .paid = {.invoice = "s-1-1", .amount = 1000, .at = "2026-11-29T10:00:00.000Z"}};
    std::optional<billing::ledger> day;
    EXPECT_TRUE(add(day));
    EXPECT_FALSE(add(day));
    EXPECT_EQ(day->paid.size(), 1u);
}

}  // namespace
