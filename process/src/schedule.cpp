// Schedules (keel/process/schedule.hpp): a durable process per schedule that sleeps until the
// next tick of its calendar and starts the tick's instance; declared and controlled through
// the engine with signals to it.

#include <fmt/chrono.h>

#include <keel/framework/rfc3339.hpp>
#include <keel/process/context.hpp>
#include <keel/process/cron.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/schedule.hpp>

namespace keel::process {

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr std::string_view control_path = "/keel/schedule/control";

std::string_view overlap_name(overlap_policy p) {
    switch (p) {
        case overlap_policy::skip:
            return "skip";
        case overlap_policy::buffer_one:
            return "buffer_one";
        case overlap_policy::allow_all:
            return "allow_all";
        case overlap_policy::cancel_previous:
            return "cancel_previous";
    }
    return "skip";
}

overlap_policy overlap_named(std::string_view name) {
    for (auto p :
         {overlap_policy::buffer_one, overlap_policy::allow_all, overlap_policy::cancel_previous})
        if (overlap_name(p) == name) return p;
    return overlap_policy::skip;
}

std::int64_t ms_of(duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// What a schedule runs, as its process keeps it.
struct plan {
    schedule_options options;
    std::string definition;  // the scheduled definition's pattern
    json params;             // its parameters but the tick
};

json plan_json(const plan& p) {
    const auto& o = p.options;
    return {{"cron", o.cron},
            {"zone", o.zone},
            {"overlap", overlap_name(o.overlap)},
            {"catch_up_ms", ms_of(o.catch_up_window)},
            {"latest_only", o.catch_up_latest_only},
            {"jitter_ms", ms_of(o.jitter)},
            {"journal_bound", o.journal_bound},
            {"definition", p.definition},
            {"params", p.params}};
}

plan plan_of(const json& j) {
    plan p;
    p.options.cron = j.at("cron").get<std::string>();
    p.options.zone = j.at("zone").get<std::string>();
    p.options.overlap = overlap_named(j.at("overlap").get<std::string>());
    p.options.catch_up_window = std::chrono::milliseconds(j.at("catch_up_ms").get<std::int64_t>());
    p.options.catch_up_latest_only = j.at("latest_only").get<bool>();
    // Plans declared before jitter existed have none.
    p.options.jitter = std::chrono::milliseconds(j.value("jitter_ms", std::int64_t{0}));
    p.options.journal_bound = j.value("journal_bound", schedule_options{}.journal_bound);
    p.definition = j.at("definition").get<std::string>();
    p.params = j.at("params");
    return p;
}

// The instance id `pattern` gives for `params` (as definition::instance_id does).
std::string id_for(std::string_view pattern, const json& params) {
    std::string id;
    std::size_t next = 0;
    std::size_t i = 1;
    while (i <= pattern.size()) {
        auto end = pattern.find('/', i);
        if (end == std::string_view::npos) end = pattern.size();
        auto segment = pattern.substr(i, end - i);
        if (!id.empty()) id += '/';
        if (!segment.empty() && segment.front() == ':') {
            const auto& value = params.at(next++);
            id += value.is_string() ? value.get<std::string>() : value.dump();
        } else {
            id += segment;
        }
        i = end + 1;
    }
    return id;
}

// How long after tick `t` schedule `name` starts it: below `jitter`, the same on every worker
// and every replay (FNV-1a of the name and the tick), different from tick to tick.
duration jitter_of(std::string_view name, time_point t, duration jitter) {
    auto ms = ms_of(jitter);
    if (ms <= 0) return duration::zero();
    std::uint64_t h = 14695981039346656037ull;
    auto mix = [&h](std::string_view text) {
        for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    };
    mix(name);
    mix("@");
    mix(tick_text(t));
    return std::chrono::milliseconds(static_cast<std::int64_t>(h % static_cast<std::uint64_t>(ms)));
}

// ---- the schedule's process ----

enum class woke { control, child_ended, tick };
struct wake_up {
    woke why;
    json value;
};

// The first of: a control signal, the end of the running tick's instance, the next tick.
durable<wake_up> next_wake_up(context& ctx, const std::optional<std::string>& running,
                              std::optional<time_point> due) {
    auto control = ctx.wait<json>(std::string(control_path));
    if (running && due) {
        auto r = co_await ctx.race(std::move(control), ctx.wait<json>(child_path(*running)),
                                   ctx.timer_at(*due, "tick"));
        if (r.is<0>()) co_return wake_up{woke::control, r.get<0>()};
        if (r.is<1>()) co_return wake_up{woke::child_ended, r.get<1>()};
        co_return wake_up{woke::tick, {}};
    }
    if (running) {
        auto r = co_await ctx.race(std::move(control), ctx.wait<json>(child_path(*running)));
        if (r.is<0>()) co_return wake_up{woke::control, r.get<0>()};
        co_return wake_up{woke::child_ended, r.get<1>()};
    }
    if (due) {
        auto r = co_await ctx.race(std::move(control), ctx.timer_at(*due, "tick"));
        if (r.is<0>()) co_return wake_up{woke::control, r.get<0>()};
        co_return wake_up{woke::tick, {}};
    }
    auto value = co_await std::move(control);
    co_return wake_up{woke::control, std::move(value)};
}

// A time as its count (time_since_epoch, as context::now records it), null when absent.
json count_of(std::optional<time_point> t) {
    return t ? json(t->time_since_epoch().count()) : json(nullptr);
}
std::optional<time_point> time_of(const json& count) {
    if (count.is_null()) return std::nullopt;
    return time_point(duration(count.get<duration::rep>()));
}

class schedule_run {
  public:
    schedule_run(context& ctx, engine& eng, std::string name, plan p)
        : ctx_(ctx), eng_(eng), name_(std::move(name)), plan_(std::move(p)) {}

    // The params it continues as new with: its name, plan and state.
    json params() const {
        json state = {{"last", count_of(last_)},
                      {"paused", paused_},
                      {"running", running_ ? json(*running_) : json(nullptr)},
                      {"buffered", count_of(buffered_)},
                      {"last_tick", count_of(last_tick_)},
                      {"last_instance", last_instance_ ? json(*last_instance_) : json(nullptr)},
                      {"counts", {started_, skipped_, missed_, cancelled_, backfilled_}}};
        return json::array({name_, plan_json(plan_), std::move(state)});
    }

    // Carried over from the run before (params()); a schedule's first run has no state.
    void resume(const json& state) {
        last_ = *time_of(state.at("last"));
        paused_ = state.at("paused").get<bool>();
        if (const auto& r = state.at("running"); !r.is_null()) running_ = r.get<std::string>();
        buffered_ = time_of(state.at("buffered"));
        last_tick_ = time_of(state.at("last_tick"));
        if (const auto& i = state.at("last_instance"); !i.is_null())
            last_instance_ = i.get<std::string>();
        const auto& counts = state.at("counts");  // in the order params() writes them
        std::uint64_t* to[] = {&started_, &skipped_, &missed_, &cancelled_, &backfilled_};
        for (std::size_t i = 0; i < std::size(to); ++i) *to[i] = counts.at(i).get<std::uint64_t>();
        resumed_ = true;
    }

    durable<json> run() {
        if (!resumed_) last_ = co_await ctx_.now();
        for (;;) {
            if (ctx_.journal_length() >= plan_.options.journal_bound) {
                auto again = ctx_.continue_as_new(params());
                co_await std::move(again);  // returns while an earlier Keel build runs
            }
            auto calendar = cron_schedule::parse(plan_.options.cron, plan_.options.zone);
            if (!calendar) throw std::invalid_argument(calendar.error().message);
            std::optional<time_point> due;
            if (!paused_) due = calendar->next_after(last_);
            publish_state(due);
            std::optional<time_point> start_at;
            if (due) start_at = *due + jitter_of(name_, *due, plan_.options.jitter);
            auto woken = next_wake_up(ctx_, running_, start_at);
            auto w = co_await std::move(woken);
            if (w.why == woke::child_ended) {
                running_.reset();
                if (auto tick = std::exchange(buffered_, std::nullopt)) {
                    auto launched = launch(*tick);
                    co_await std::move(launched);
                }
            } else if (w.why == woke::tick) {
                auto ticked = on_tick(*calendar);
                co_await std::move(ticked);
            } else {
                auto controlled = on_control(w.value);
                co_await std::move(controlled);
            }
        }
    }

  private:
    durable<void> on_tick(const cron_schedule& calendar) {
        auto now = co_await ctx_.now();
        auto ticks = calendar.ticks_between(last_, now, 100'000);
        last_ = std::max(last_, now);
        std::vector<time_point> runs;
        for (auto t : ticks) {
            if (now - t <= plan_.options.catch_up_window)
                runs.push_back(t);
            else
                ++missed_;
        }
        if (plan_.options.catch_up_latest_only && runs.size() > 1) {
            skipped_ += runs.size() - 1;
            runs.erase(runs.begin(), runs.end() - 1);
        }
        for (auto t : runs) {
            auto launched = launch(t);
            co_await std::move(launched);
        }
    }

    durable<void> on_control(const json& signal) {
        auto action = signal.is_object() ? signal.value("action", std::string()) : std::string();
        if (action == "pause") {
            paused_ = true;
        } else if (action == "resume" && paused_) {
            paused_ = false;
            last_ = co_await ctx_.now();  // the ticks of the pause are not caught up
        } else if (action == "trigger") {
            auto now = co_await ctx_.now();
            auto launched = launch(now);
            co_await std::move(launched);
        } else if (action == "set") {
            plan_ = plan_of(signal.at("plan"));
        } else if (action == "backfill") {
            auto backfilled = backfill(signal);
            co_await std::move(backfilled);
        }
    }

    // The calendar's ticks in [from, to], each started detached unless its instance exists.
    durable<void> backfill(const json& signal) {
        auto calendar = cron_schedule::parse(plan_.options.cron, plan_.options.zone);
        if (!calendar) co_return;
        auto from = time_point(std::chrono::milliseconds(signal.at("from_ms").get<std::int64_t>()));
        auto to = time_point(std::chrono::milliseconds(signal.at("to_ms").get<std::int64_t>()));
        for (auto t : calendar->ticks_between(from - duration(1), to, max_backfill)) {
            // Detached: a tick whose instance exists (it ran) is found, not run again.
            auto started = start_tick(t, true);
            if (co_await std::move(started)) ++backfilled_;
        }
    }

    // Starts the instance of tick `t`, unless the overlap policy says otherwise.
    durable<void> launch(time_point t) {
        auto overlap = plan_.options.overlap;
        if (running_ && overlap == overlap_policy::skip) {
            ++skipped_;
            co_return;
        }
        if (running_ && overlap == overlap_policy::buffer_one) {
            // The latest tick waits; one buffered before it is skipped.
            if (std::exchange(buffered_, t)) ++skipped_;
            co_return;
        }
        if (running_ && overlap == overlap_policy::cancel_previous) {
            auto cancelled = cancel_running();
            co_await std::move(cancelled);
        }
        auto started = start_tick(t, overlap == overlap_policy::allow_all);
        if (!co_await std::move(started)) {
            ++skipped_;  // e.g. its instance exists, started by someone else: in the journal
            co_return;
        }
        ++started_;
        last_tick_ = t;
        last_instance_ = last_started_;
    }

    // Starts tick `t`'s instance, the one the schedule waits for or a detached one; false
    // when the start failed for good.
    durable<bool> start_tick(time_point t, bool detached) {
        auto params = plan_.params;
        params.push_back(tick_text(t));
        auto id = id_for(plan_.definition, params);
        child_options options{.on_parent_close = parent_close::abandon, .detached = detached};
        try {
            auto started = ctx_.start_child(plan_.definition, id, params, options);
            co_await std::move(started);
        } catch (const step_failed&) {
            co_return false;
        }
        if (!detached) running_ = id;
        last_started_ = std::move(id);
        co_return true;
    }

    // cancel_previous: the running tick's instance is cancelled (a step, tried again while
    // its worker is in the middle of a step), then its outcome, which it sends this schedule
    // before it records its end, is taken from the inbox, so outcomes do not pile up there.
    durable<void> cancel_running() {
        auto id = *std::exchange(running_, std::nullopt);
        auto cancel = [&eng = eng_, id]() -> asio::awaitable<bool> {
            auto r = co_await eng.cancel(id);
            if (r) co_return true;
            auto why = r.error().why;
            if (why == refusal::reason::final || why == refusal::reason::not_found) co_return false;
            throw std::runtime_error(r.error().message);
        };
        try {
            auto step = ctx_.run("cancel " + id, cancel);
            if (co_await std::move(step)) ++cancelled_;
        } catch (const step_failed&) {
            co_return;  // still running: its outcome reaches the inbox when it ends
        }
        auto outcome = ctx_.wait<json>(child_path(id));
        auto r = co_await ctx_.race(std::move(outcome), ctx_.timer(1min, "outcome of " + id));
        (void)r;
    }

    // What operators see of the schedule (GET /admin/schedules, keel schedules): its plan,
    // state and counts, published with the commit of the wait that follows.
    void publish_state(std::optional<time_point> due) {
        auto when = [](std::optional<time_point> t) {
            return t ? json(format_rfc3339(*t)) : json(nullptr);
        };
        auto state = plan_json(plan_);
        state["paused"] = paused_;
        state["next"] = when(due);
        state["last_tick"] = when(last_tick_);
        state["last_instance"] = last_instance_ ? json(*last_instance_) : json(nullptr);
        state["running"] = running_ ? json(*running_) : json(nullptr);
        state["buffered"] = when(buffered_);
        state["started"] = started_;
        state["skipped"] = skipped_;
        state["missed"] = missed_;
        state["cancelled"] = cancelled_;
        state["backfilled"] = backfilled_;
        ctx_.publish("schedule", state);
    }

    context& ctx_;
    engine& eng_;
    std::string name_;
    plan plan_;
    time_point last_{};  // ticks after this are still to come
    bool paused_ = false;
    std::optional<std::string> running_;  // the tick's instance that runs (skip, buffer_one)
    std::optional<time_point> buffered_;
    std::optional<time_point> last_tick_;       // of the last instance started
    std::optional<std::string> last_instance_;  // the instance last_tick_ started
    std::string last_started_;                  // the instance start_tick last started
    // Ticks: instances started; skipped (overlap, catch-up of the latest only, an instance
    // that existed); missed (older than the catch-up window after downtime).
    // cancel_previous: running instances cancelled by a later tick. Backfilled: ticks in
    // backfilled ranges (started, or found when they had run).
    std::uint64_t started_ = 0, skipped_ = 0, missed_ = 0, cancelled_ = 0, backfilled_ = 0;
    bool resumed_ = false;  // carried over: this run continues an earlier one
};

// params: [name, plan, state], the state absent in a schedule's first run.
durable<json> run_schedule(context& ctx, engine& eng, json params) {
    schedule_run run(ctx, eng, params.at(0).get<std::string>(), plan_of(params.at(1)));
    if (params.size() > 2) run.resume(params.at(2));
    auto body = run.run();
    co_return co_await std::move(body);
}

// std::invalid_argument naming the schedule and the field, for declarations.
[[noreturn]] void refuse(const schedule_options& o, const std::string& what) {
    throw std::invalid_argument("schedule " + (o.name.empty() ? "\"\"" : o.name) + ": " + what);
}

void validate(const schedule_options& o) {
    if (o.name.empty() || o.name.find('/') != std::string::npos)
        refuse(o, "name: must be a non-empty path segment (no '/')");
    if (auto calendar = cron_schedule::parse(o.cron, o.zone); !calendar)
        refuse(o, calendar.error().message);
    if (o.catch_up_window < duration::zero()) refuse(o, "catch_up_window: must not be negative");
    if (o.jitter < duration::zero()) refuse(o, "jitter: must not be negative");
    if (o.journal_bound < min_journal_bound)
        refuse(o, "journal_bound: must be at least " + std::to_string(min_journal_bound));
}

asio::awaitable<delivery> control(engine& e, std::string name, std::string action) {
    return e.deliver(schedule_instance_id(name), std::string(control_path),
                     json{{"action", std::move(action)}});
}

}  // namespace

std::string tick_text(time_point tick) {
    auto seconds = std::chrono::floor<std::chrono::seconds>(tick);
    return fmt::format("{:%Y%m%dT%H%M%S}Z",
                       fmt::gmtime(std::chrono::system_clock::to_time_t(seconds)));
}

std::string schedule_instance_id(std::string_view name) {
    return "keel/schedule/" + std::string(name);
}

void engine::add_schedules() {
    add_definition(std::string(schedule_definition), [this](context& ctx, const json& params) {
        return run_schedule(ctx, *this, params);
    });
}

asio::awaitable<void> engine::schedule_named(schedule_options options, std::string definition,
                                             nlohmann::json params) {
    validate(options);
    if (!runs(definition))
        refuse(options, "definition: " + definition + " is not registered with this engine");
    auto spec = plan_json(plan{options, std::move(definition), std::move(params)});
    auto id = schedule_instance_id(options.name);
    json start_params = json::array();
    start_params.push_back(options.name);
    start_params.push_back(spec);
    co_await start_instance(std::string(schedule_definition), id, std::move(start_params));
    // Declared again, perhaps differently: the schedule adopts what is declared now (the key
    // makes every declaration of the same plan one signal).
    auto key = "plan " + spec.dump();
    json set;
    set["action"] = "set";
    set["plan"] = std::move(spec);
    co_await deliver(id, std::string(control_path), std::move(set), std::move(key));
}

asio::awaitable<delivery> engine::pause_schedule(std::string name) {
    return control(*this, std::move(name), "pause");
}
asio::awaitable<delivery> engine::resume_schedule(std::string name) {
    return control(*this, std::move(name), "resume");
}
asio::awaitable<delivery> engine::trigger_schedule(std::string name) {
    return control(*this, std::move(name), "trigger");
}

asio::awaitable<delivery> engine::backfill_schedule(std::string name, time_point from,
                                                    time_point to) {
    schedule_options named{.name = name};
    if (from > to) refuse(named, "backfill: from is after to");
    auto id = schedule_instance_id(name);
    auto state = co_await published(id, "schedule");
    if (!state) co_return delivery{delivery::outcome::no_instance};
    auto calendar = cron_schedule::parse(state->value("cron", std::string()),
                                         state->value("zone", std::string("UTC")));
    if (!calendar) refuse(named, calendar.error().message);
    if (calendar->ticks_between(from - duration(1), to, max_backfill + 1).size() > max_backfill)
        refuse(named, fmt::format("backfill: the range holds more than {} ticks", max_backfill));
    json signal{{"action", "backfill"},
                {"from_ms", ms_of(from.time_since_epoch())},
                {"to_ms", ms_of(to.time_since_epoch())}};
    co_return co_await deliver(id, std::string(control_path), std::move(signal));
}
asio::awaitable<action_result> engine::delete_schedule(std::string name) {
    return cancel(schedule_instance_id(name));
}

}  // namespace keel::process
