// Schedules in virtual time: ticks at the calendar's instants across a daylight-saving change,
// each started once, overlap policies, catch-up after downtime, pause, resume, trigger,
// redeclaration, two workers, and declarations refused with the field at fault.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <keel/process/forwarding_store.hpp>
#include <keel/process/schedule.hpp>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using std::chrono::days;
using test::harness;

durable<std::string> report(context& ctx, std::string region, std::string tick) {
    co_await ctx.now();
    co_return region + "@" + tick;
}
inline constexpr auto reporting = define<report>("/report/:region/:tick");

// Runs until /go.
durable<std::string> slow_job(context& ctx, std::string tick) {
    co_await ctx.wait("/go");
    co_return tick;
}
inline constexpr auto jobs = define<slow_job>("/job/:tick");

// A tick's handler must take the tick last, as a std::string.
template <class Def, class... P>
concept schedulable = requires(engine& e, const Def& def, P... p) {
    e.schedule(schedule_options{}, def, p...);
};
static_assert(schedulable<decltype(reporting), std::string>);
static_assert(!schedulable<decltype(reporting)>);
static_assert(!schedulable<decltype(reporting), int>);
static_assert(schedulable<decltype(jobs)>);

time_point utc(int y, unsigned m, unsigned d, int hours = 0, int minutes = 0) {
    return std::chrono::sys_days{std::chrono::year{y} / m / d} + std::chrono::hours(hours) +
           std::chrono::minutes(minutes);
}

struct schedules_test : ::testing::Test {
    harness h;
    schedules_test() {
        h.clock.advance_to(utc(2026, 10, 20));
        h.settle();
        h.eng->add(reporting);
        h.eng->add(jobs);
    }
    // The instances of `def`, by id.
    std::set<std::string> instances_of(std::string_view def) {
        list_query q;
        q.definition = std::string(def);
        q.limit = 1000;
        std::set<std::string> out;
        for (const auto& i : h.sync(h.store.list(q)).instances) out.insert(i.id);
        return out;
    }
    // What the schedule published of itself (GET /admin/schedules shows it).
    nlohmann::json state(const std::string& name) {
        return h.sync(h.eng->published(schedule_instance_id(name), "schedule")).value_or(nullptr);
    }
    // Virtual time passes in steps of `step`, a worker running throughout.
    void pass(duration total, duration step = 1h) {
        for (duration done{}; done < total; done += step) h.advance(step);
    }
};

TEST_F(schedules_test, ticks_at_the_zones_wall_clock_time_across_the_autumn_change) {
    h.sync(h.eng->schedule({.name = "report-eu", .cron = "0 3 * * *", .zone = "Europe/Berlin"},
                           reporting, std::string("eu")));
    pass(days(7));  // to 2026-10-27T00:00Z; Berlin leaves summer time on 2026-10-25
    std::set<std::string> expected = {"report/eu/20261020T010000Z", "report/eu/20261021T010000Z",
                                      "report/eu/20261022T010000Z", "report/eu/20261023T010000Z",
                                      "report/eu/20261024T010000Z",
                                      "report/eu/20261025T020000Z",  // 03:00 CET from here on
                                      "report/eu/20261026T020000Z"};
    EXPECT_EQ(instances_of("/report/:region/:tick"), expected);
    auto info = h.sync(h.eng->describe("report/eu/20261025T020000Z"));
    ASSERT_TRUE(info);
    EXPECT_EQ(info->status, instance_status::completed);
    EXPECT_EQ(info->result, "eu@20261025T020000Z");
    EXPECT_EQ(h.status(schedule_instance_id("report-eu")), instance_status::suspended);
}

TEST_F(schedules_test, skip_leaves_out_the_ticks_that_fall_while_the_last_one_runs) {
    h.sync(h.eng->schedule({.name = "hourly", .cron = "0 * * * *"}, jobs));
    pass(3h + 30min, 30min);  // ticks at 01:00, 02:00, 03:00; the first never ends
    EXPECT_EQ(instances_of("/job/:tick"), std::set<std::string>{"job/20261020T010000Z"});
    auto s = state("hourly");
    EXPECT_EQ(s["started"], 1);
    EXPECT_EQ(s["skipped"], 2);
    EXPECT_EQ(s["missed"], 0);
    EXPECT_EQ(s["running"], "job/20261020T010000Z");
    EXPECT_EQ(s["last_tick"], "2026-10-20T01:00:00.000Z");
    EXPECT_EQ(s["next"], "2026-10-20T04:00:00.000Z");
    EXPECT_EQ(s["cron"], "0 * * * *");
    EXPECT_EQ(s["paused"], false);
    auto metrics = h.sync(h.eng->render_metrics());
    for (auto line : {R"(keel_schedule_ticks_total{schedule="hourly",outcome="started"} 1)",
                      R"(keel_schedule_ticks_total{schedule="hourly",outcome="skipped"} 2)",
                      R"(keel_schedule_ticks_total{schedule="hourly",outcome="missed"} 0)",
                      R"(keel_schedule_paused{schedule="hourly"} 0)"})
        EXPECT_NE(metrics.find(std::string(line) + "\n"), std::string::npos) << line << "\n"
                                                                             << metrics;
    h.sync(h.eng->deliver("job/20261020T010000Z", "/go", nullptr));
    pass(1h, 30min);
    EXPECT_EQ(instances_of("/job/:tick"),
              (std::set<std::string>{"job/20261020T010000Z", "job/20261020T040000Z"}));
}

TEST_F(schedules_test, buffer_one_starts_the_latest_tick_when_the_last_one_ends) {
    h.sync(h.eng->schedule(
        {.name = "buffered", .cron = "0 * * * *", .overlap = overlap_policy::buffer_one}, jobs));
    pass(3h + 30min, 30min);
    EXPECT_EQ(instances_of("/job/:tick"), std::set<std::string>{"job/20261020T010000Z"});
    h.sync(h.eng->deliver("job/20261020T010000Z", "/go", nullptr));
    // 02:00 was buffered, then replaced by 03:00: it starts as soon as 01:00 has ended.
    EXPECT_EQ(instances_of("/job/:tick"),
              (std::set<std::string>{"job/20261020T010000Z", "job/20261020T030000Z"}));
}

TEST_F(schedules_test, allow_all_starts_every_tick) {
    h.sync(h.eng->schedule(
        {.name = "all", .cron = "0 * * * *", .overlap = overlap_policy::allow_all}, jobs));
    pass(3h + 30min, 30min);
    EXPECT_EQ(instances_of("/job/:tick"),
              (std::set<std::string>{"job/20261020T010000Z", "job/20261020T020000Z",
                                     "job/20261020T030000Z"}));
    // Detached: their outcomes do not pile up in the schedule's inbox.
    for (auto id : {"job/20261020T010000Z", "job/20261020T020000Z"})
        h.sync(h.eng->deliver(id, "/go", nullptr));
    auto schedule = h.snapshot(schedule_instance_id("all"));
    EXPECT_TRUE(schedule.inbox.empty());
    // What a tick costs the schedule's journal: its timer, the race, now() and the start.
    EXPECT_EQ(schedule.journal.size(), 3 + 4 * 3u);
}

TEST_F(schedules_test, cancel_previous_cancels_the_running_tick_and_starts_the_next) {
    h.sync(h.eng->schedule(
        {.name = "latest", .cron = "0 * * * *", .overlap = overlap_policy::cancel_previous}, jobs));
    pass(3h + 30min, 30min);
    EXPECT_EQ(instances_of("/job/:tick"),
              (std::set<std::string>{"job/20261020T010000Z", "job/20261020T020000Z",
                                     "job/20261020T030000Z"}));
    EXPECT_EQ(h.status("job/20261020T010000Z"), instance_status::cancelled);
    EXPECT_EQ(h.status("job/20261020T020000Z"), instance_status::cancelled);
    EXPECT_EQ(h.status("job/20261020T030000Z"), instance_status::suspended);
    auto s = state("latest");
    EXPECT_EQ(s["overlap"], "cancel_previous");
    EXPECT_EQ(s["started"], 3);
    EXPECT_EQ(s["cancelled"], 2);
    EXPECT_EQ(s["skipped"], 0);
    EXPECT_EQ(s["running"], "job/20261020T030000Z");
    // The cancelled instances' outcomes were taken from the schedule's inbox.
    EXPECT_TRUE(h.snapshot(schedule_instance_id("latest")).inbox.empty());
    // One that ended by itself meanwhile is not cancelled, and the next tick still starts.
    h.sync(h.eng->deliver("job/20261020T030000Z", "/go", nullptr));
    pass(1h, 30min);
    EXPECT_EQ(h.status("job/20261020T030000Z"), instance_status::completed);
    EXPECT_EQ(h.status("job/20261020T040000Z"), instance_status::suspended);
    EXPECT_EQ(state("latest")["cancelled"], 2);
}

TEST_F(schedules_test, jitter_delays_each_start_by_its_own_offset_and_keeps_the_tick) {
    const auto jitter = 20min;
    h.sync(h.eng->schedule({.name = "spread",
                            .cron = "0 * * * *",
                            .overlap = overlap_policy::allow_all,
                            .jitter = jitter},
                           jobs));
    std::map<std::string, time_point> first_seen;
    for (auto t = h.clock.now(); t < utc(2026, 10, 20, 6, 30); t += 1min) {
        h.advance(1min);
        for (const auto& id : instances_of("/job/:tick")) first_seen.emplace(id, h.clock.now());
    }
    ASSERT_EQ(first_seen.size(), 6u);  // 01:00 to 06:00
    std::set<duration> offsets;
    for (int hour = 1; hour <= 6; ++hour) {
        auto tick = utc(2026, 10, 20, hour);
        auto id = "job/" + tick_text(tick);
        ASSERT_TRUE(first_seen.contains(id)) << id;
        auto late = first_seen[id] - tick;
        EXPECT_GT(late, duration::zero()) << id;  // seen at the end of a minute's advance
        EXPECT_LE(late, jitter + 1min) << id;
        offsets.insert(late);
    }
    EXPECT_GT(offsets.size(), 1u) << "every tick has its own offset";
}

TEST_F(schedules_test, a_backfill_runs_the_ticks_of_a_range_that_did_not_run) {
    h.sync(h.eng->schedule({.name = "late", .cron = "0 * * * *", .catch_up_window = 0s}, jobs));
    h.settle();
    auto d = h.sync(h.eng->backfill_schedule("late", utc(2026, 10, 19, 20), utc(2026, 10, 19, 22)));
    EXPECT_EQ(d.result, delivery::outcome::stored);
    h.settle();
    EXPECT_EQ(instances_of("/job/:tick"),
              (std::set<std::string>{"job/20261019T200000Z", "job/20261019T210000Z",
                                     "job/20261019T220000Z"}));
    // Again over a wider range: only the ticks that did not run start.
    h.sync(h.eng->backfill_schedule("late", utc(2026, 10, 19, 21), utc(2026, 10, 19, 23, 30)));
    h.settle();
    EXPECT_EQ(instances_of("/job/:tick").size(), 4u);
    auto s = state("late");
    EXPECT_EQ(s["backfilled"], 6) << "the ticks asked for; each instance runs once";
    EXPECT_EQ(s["started"], 0) << "by the calendar";
    EXPECT_TRUE(s["running"].is_null()) << "backfilled ticks run detached";
    auto refused = [&](time_point from, time_point to) -> std::string {
        try {
            h.sync(h.eng->backfill_schedule("late", from, to));
        } catch (const std::invalid_argument& e) {
            return e.what();
        }
        return "accepted";
    };
    EXPECT_EQ(refused(utc(2026, 10, 19, 2), utc(2026, 10, 19, 1)),
              "schedule late: backfill: from is after to");
    EXPECT_EQ(refused(utc(2026, 8, 1), utc(2026, 10, 1)),
              "schedule late: backfill: the range holds more than 1000 ticks");
    EXPECT_EQ(h.sync(h.eng->backfill_schedule("nope", utc(2026, 10, 19), utc(2026, 10, 20))).result,
              delivery::outcome::no_instance);
}

TEST_F(schedules_test, after_downtime_the_ticks_within_the_window_are_caught_up) {
    h.sync(h.eng->schedule({.name = "catch-up",
                            .cron = "0 * * * *",
                            .overlap = overlap_policy::allow_all,
                            .catch_up_window = 2h + 45min},
                           jobs));
    h.eng.reset();  // no worker from 00:00 to 06:30
    h.settle();
    h.clock.advance(6h + 30min);
    h.eng.emplace(h.io.get_executor(), h.store, h.clock, engine_options{.worker = "w2", .seed = 3});
    h.eng->add(reporting);
    h.eng->add(jobs);
    h.eng->run();
    h.advance(1s);
    // 04:00, 05:00 and 06:00 are within 2h45 of 06:30; 01:00 to 03:00 are missed.
    EXPECT_EQ(instances_of("/job/:tick"),
              (std::set<std::string>{"job/20261020T040000Z", "job/20261020T050000Z",
                                     "job/20261020T060000Z"}));
    auto s = state("catch-up");
    EXPECT_EQ(s["started"], 3);
    EXPECT_EQ(s["missed"], 3);
    EXPECT_EQ(s["skipped"], 0);
}

TEST_F(schedules_test, after_downtime_only_the_latest_tick_when_asked) {
    h.sync(h.eng->schedule({.name = "latest",
                            .cron = "0 * * * *",
                            .overlap = overlap_policy::allow_all,
                            .catch_up_window = 24h,
                            .catch_up_latest_only = true},
                           jobs));
    h.eng.reset();
    h.settle();
    h.clock.advance(5h + 10min);
    h.eng.emplace(h.io.get_executor(), h.store, h.clock, engine_options{.worker = "w2", .seed = 3});
    h.eng->add(reporting);
    h.eng->add(jobs);
    h.eng->run();
    h.advance(1s);
    EXPECT_EQ(instances_of("/job/:tick"), std::set<std::string>{"job/20261020T050000Z"});
}

TEST_F(schedules_test, paused_schedules_do_not_tick_and_resume_without_catching_up) {
    h.sync(h.eng->schedule({.name = "p", .cron = "0 * * * *", .overlap = overlap_policy::allow_all},
                           jobs));
    pass(1h + 30min, 30min);  // 01:00
    EXPECT_EQ(h.sync(h.eng->pause_schedule("p")).result, delivery::outcome::stored);
    pass(3h, 30min);  // 02:00 to 04:00 paused
    EXPECT_EQ(state("p")["paused"], true);
    EXPECT_TRUE(state("p")["next"].is_null());
    h.sync(h.eng->resume_schedule("p"));
    pass(1h, 30min);  // 05:00
    EXPECT_EQ(instances_of("/job/:tick"),
              (std::set<std::string>{"job/20261020T010000Z", "job/20261020T050000Z"}));
}

// A schedule's journal grows by a few entries a tick; past its bound the schedule continues
// as new, its state (counts, pause, last tick) carried in its params.
TEST_F(schedules_test, a_schedule_continues_as_new_within_its_journal_bound_and_keeps_its_state) {
    schedule_options o{.name = "hourly",
                       .cron = "0 * * * *",
                       .overlap = overlap_policy::allow_all,
                       .journal_bound = min_journal_bound};
    h.sync(h.eng->schedule(o, reporting, std::string("x")));
    auto id = schedule_instance_id("hourly");
    std::size_t longest = 0;
    auto pass_watching = [&](int steps, duration step) {
        for (int i = 0; i < steps; ++i) {
            h.advance(step);
            longest = std::max(longest, h.snapshot(id).journal.size());
        }
    };
    pass_watching(48, 30min);  // 24 ticks: 01:00 to 00:00 the next day
    // Paused, triggers fill its journal: it continues as new and stays paused.
    h.sync(h.eng->pause_schedule("hourly"));
    for (int i = 0; i < 8; ++i) {
        h.advance(1min);
        h.sync(h.eng->trigger_schedule("hourly"));
        pass_watching(1, 0s);
    }
    pass_watching(3, 1h);
    EXPECT_EQ(state("hourly")["paused"], true);
    EXPECT_TRUE(state("hourly")["next"].is_null());
    h.sync(h.eng->resume_schedule("hourly"));
    pass_watching(48, 30min);  // 24 ticks: 04:00 to 03:00 the next day

    auto st = state("hourly");
    EXPECT_EQ(st["started"], 24 + 8 + 24) << st.dump();
    EXPECT_EQ(st["skipped"], 0) << st.dump();
    EXPECT_EQ(st["last_tick"], "2026-10-22T03:00:00.000Z") << st.dump();
    EXPECT_EQ(instances_of("/report/:region/:tick").size(), 56u);
    EXPECT_LE(longest, min_journal_bound + 5);
    EXPECT_EQ(h.snapshot(id).params.size(), 3u) << "never continued as new";
}

TEST_F(schedules_test, a_trigger_ticks_now_and_delete_ends_the_schedule) {
    h.sync(h.eng->schedule({.name = "t", .cron = "0 0 1 1 *", .overlap = overlap_policy::allow_all},
                           jobs));
    h.advance(17min);
    h.sync(h.eng->trigger_schedule("t"));
    EXPECT_EQ(instances_of("/job/:tick"), std::set<std::string>{"job/20261020T001700Z"});
    ASSERT_TRUE(h.sync(h.eng->delete_schedule("t")).has_value());
    EXPECT_EQ(h.status(schedule_instance_id("t")), instance_status::cancelled);
    EXPECT_EQ(h.status("job/20261020T001700Z"), instance_status::suspended) << "runs on";
}

TEST_F(schedules_test, declared_again_differently_the_schedule_changes_and_stays_one) {
    auto declare = [&](std::string cron) {
        h.sync(h.eng->schedule(
            {.name = "r", .cron = std::move(cron), .overlap = overlap_policy::allow_all}, jobs));
    };
    declare("0 * * * *");
    declare("0 * * * *");  // a second worker, or a restart: nothing changes
    pass(1h + 30min, 30min);
    declare("30 * * * *");
    pass(1h + 30min, 30min);
    EXPECT_EQ(instances_of("/job/:tick"),
              (std::set<std::string>{"job/20261020T010000Z", "job/20261020T013000Z",
                                     "job/20261020T023000Z"}));
    EXPECT_EQ(instances_of("/keel/schedule/:name"), std::set<std::string>{"keel/schedule/r"});
}

TEST_F(schedules_test, two_workers_start_each_tick_once) {
    engine second(h.io.get_executor(), h.store, h.clock, engine_options{.worker = "w2", .seed = 9});
    second.add(reporting);
    second.add(jobs);
    second.run();
    schedule_options o{
        .name = "both", .cron = "*/20 * * * *", .overlap = overlap_policy::allow_all};
    h.sync(h.eng->schedule(o, jobs));
    h.sync(second.schedule(o, jobs));
    pass(2h + 10min, 10min);
    EXPECT_EQ(instances_of("/job/:tick").size(), 6u);  // 00:20 to 02:00, every 20 minutes
    second.stop();
    h.settle();
}

// A worker that dies as kill -9 leaves one: armed, it dies in its first commit to `target`
// (the write never lands, its lease stays until it expires), and every call after fails.
struct mortal_store final : forwarding_store {
    using forwarding_store::forwarding_store;
    std::string target;
    bool armed = false;
    bool dead = false;
    std::function<void()> on_death;
    asio::awaitable<void> before_call() override {
        if (dead) throw std::runtime_error("killed");
        co_return;
    }
    asio::awaitable<expected<commit_result, store_error>> commit(commit_request req) override {
        if (armed && !dead && req.instance == target) {
            dead = true;
            if (on_death) on_death();
        }
        co_return co_await forwarding_store::commit(std::move(req));
    }
};

// Berlin's 02:30 for five and a half months, through both daylight-saving changes, on three
// workers; one dies in the middle of a tick (in its commit to the schedule, after the tick's
// start) and is replaced a month later. Each day's tick is started exactly once, at the
// calendar's instant (a repeated 02:30 at its first occurrence, the missing one at the end
// of the gap), none skipped or missed.
TEST_F(schedules_test, months_across_both_changes_on_three_workers_one_killed_tick_once_each) {
    h.eng->stop();  // the workers here are the three below
    h.settle();
    auto target = schedule_instance_id("nightly");
    std::vector<std::unique_ptr<mortal_store>> views;
    std::vector<std::unique_ptr<engine>> workers;
    auto add_worker = [&](std::string name) {
        views.push_back(std::make_unique<mortal_store>(h.store));
        views.back()->target = target;
        workers.push_back(std::make_unique<engine>(
            h.io.get_executor(), *views.back(), h.clock,
            engine_options{.worker = std::move(name), .seed = 7 + views.size()}));
        workers.back()->add(reporting);
        workers.back()->add(jobs);
        workers.back()->run();
    };
    for (const char* name : {"w1", "w2", "w3"}) add_worker(name);
    // It continues as new every few days (about four entries a tick), across the death too.
    schedule_options o{.name = "nightly",
                       .cron = "30 2 * * *",
                       .zone = "Europe/Berlin",
                       .journal_bound = min_journal_bound};
    for (auto& e : workers) h.sync(e->schedule(o, reporting, std::string("eu")));

    std::optional<std::size_t> killed;
    for (std::size_t i = 0; i < views.size(); ++i)
        views[i]->on_death = [&, i] {
            killed = i;
            for (auto& v : views) v->armed = false;
        };
    auto end = utc(2027, 4, 5);
    bool armed = false, stopped = false, replaced = false;
    std::optional<time_point> died_at;
    while (h.clock.now() < end) {
        // A minute at a time around the death, so that the take-over comes as soon after the
        // lease's end as it would in real time (an hour's step would make it late past the
        // catch-up window); an hour at a time otherwise.
        bool close = armed && (!died_at || h.clock.now() < *died_at + 2h);
        h.advance(std::min<duration>(close ? duration(1min) : duration(1h), end - h.clock.now()));
        if (killed && !died_at) died_at = h.clock.now();
        if (!armed && h.clock.now() >= utc(2026, 12, 10)) {
            armed = true;
            for (auto& v : views) v->armed = true;
        }
        if (killed && !stopped) {
            stopped = true;
            workers[*killed]->stop();
            h.settle();
        }
        if (stopped && !replaced && h.clock.now() >= utc(2027, 1, 10)) {
            replaced = true;
            add_worker("w4");
        }
    }
    ASSERT_TRUE(killed) << "no worker died in a tick";

    std::set<std::string> expected;
    for (auto day = std::chrono::sys_days{std::chrono::year{2026} / 10 / 20};
         day < std::chrono::sys_days{std::chrono::year{2027} / 4 / 5}; day += days(1)) {
        time_point at = day + 30min;  // CEST: 00:30Z (on 2026-10-25 the first of two 02:30s)
        if (day > std::chrono::sys_days{std::chrono::year{2026} / 10 / 25} &&
            day < std::chrono::sys_days{std::chrono::year{2027} / 3 / 28})
            at = day + 1h + 30min;  // CET
        if (day == std::chrono::sys_days{std::chrono::year{2027} / 3 / 28})
            at = day + 1h;  // 02:30 does not exist: 03:00 CEST
        auto ymd = std::chrono::year_month_day{day};
        auto tod = std::chrono::hh_mm_ss(std::chrono::floor<std::chrono::minutes>(at - day));
        char id[64];
        std::snprintf(id, sizeof id, "report/eu/%04d%02u%02uT%02d%02d00Z",
                      static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                      static_cast<unsigned>(ymd.day()), static_cast<int>(tod.hours().count()),
                      static_cast<int>(tod.minutes().count()));
        expected.insert(id);
    }
    auto ran = instances_of("/report/:region/:tick");
    EXPECT_EQ(ran, expected);
    for (const auto& id : ran) EXPECT_EQ(h.status(id), instance_status::completed) << id;
    auto st = state("nightly");
    EXPECT_EQ(st["started"], expected.size()) << st.dump();
    EXPECT_EQ(st["skipped"], 0) << st.dump();
    EXPECT_EQ(st["missed"], 0) << st.dump();
    auto schedule = h.snapshot(target);
    EXPECT_LE(schedule.journal.size(), min_journal_bound + 5);
    EXPECT_EQ(schedule.params.size(), 3u) << "never continued as new";

    for (std::size_t i = 0; i < workers.size(); ++i)
        if (!killed || i != *killed) workers[i]->stop();
    h.settle();
}

TEST_F(schedules_test, bad_declarations_are_refused_naming_the_field) {
    auto refused = [&](schedule_options o) -> std::string {
        try {
            h.sync(h.eng->schedule(std::move(o), jobs));
        } catch (const std::invalid_argument& e) {
            return e.what();
        }
        return "accepted";
    };
    EXPECT_EQ(refused({.name = "a", .cron = "61 * * * *"}),
              "schedule a: minute: 61 is out of range 0-59");
    EXPECT_EQ(refused({.name = "a", .cron = "0 3 * * *", .zone = "Mars/Olympus"}).substr(0, 23),
              "schedule a: time zone: ");
    EXPECT_EQ(refused({.name = "a/b", .cron = "0 3 * * *"}),
              "schedule a/b: name: must be a non-empty path segment (no '/')");
    EXPECT_EQ(refused({.name = "a", .cron = "0 3 * * *", .catch_up_window = -1s}),
              "schedule a: catch_up_window: must not be negative");
    EXPECT_EQ(refused({.name = "a", .cron = "0 3 * * *", .jitter = -1s}),
              "schedule a: jitter: must not be negative");
    engine bare(h.io.get_executor(), h.store, h.clock, engine_options{.worker = "w3"});
    try {
        h.sync(bare.schedule({.name = "a", .cron = "0 3 * * *"}, jobs));
        ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()),
                  "schedule a: definition: /job/:tick is not registered with this engine");
    }
    EXPECT_TRUE(instances_of("/keel/schedule/:name").empty());
}

}  // namespace
}  // namespace keel::process
