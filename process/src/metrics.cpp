#include <fmt/format.h>

#include <keel/process/metrics.hpp>

namespace keel::process {

namespace {

using prometheus::escape;
using prometheus::header;

std::uint64_t read(const std::atomic<std::uint64_t>& a) {
    return a.load(std::memory_order_relaxed);
}

}  // namespace

definition_metrics& engine_metrics::of(const std::string& definition) {
    std::lock_guard lock(mutex_);
    auto& slot = by_definition_[definition];
    if (!slot) slot = std::make_unique<definition_metrics>();
    return *slot;
}

std::string engine_metrics::render(const instance_counts* counts) const {
    std::lock_guard lock(mutex_);
    std::string out;
    auto each = [&](std::string_view name, std::string_view type, std::string_view help,
                    auto&& line) {
        header(out, name, type, help);
        for (const auto& [def, m] : by_definition_)
            line(fmt::format("definition=\"{}\"", escape(def)), *m);
    };
    auto counter = [&](std::string_view name, std::string_view help,
                       std::atomic<std::uint64_t> definition_metrics::*field) {
        each(name, "counter", help, [&](const std::string& labels, const definition_metrics& m) {
            out += fmt::format("{}{{{}}} {}\n", name, labels, read(m.*field));
        });
    };
    counter("keel_process_instances_started_total", "Instances started by this worker.",
            &definition_metrics::started);
    counter("keel_process_continued_total",
            "Runs that continued as new on this worker (the same instance, its journal emptied).",
            &definition_metrics::continued);
    each("keel_process_instances_finished_total", "counter",
         "Instances this worker brought to an end, by outcome.",
         [&](const std::string& labels, const definition_metrics& m) {
             for (auto [outcome, n] :
                  {std::pair{"completed", read(m.completed)}, std::pair{"failed", read(m.failed)},
                   std::pair{"parked", read(m.parked)}, std::pair{"cancelled", read(m.cancelled)}})
                 out +=
                     fmt::format("keel_process_instances_finished_total{{{},outcome=\"{}\"}} {}\n",
                                 labels, outcome, n);
         });
    if (counts) {
        header(out, "keel_process_instances", "gauge",
               "Instances in the store by status (all workers).");
        for (const auto& [def, row] : *counts)
            for (std::size_t i = 0; i < row.size(); ++i)
                out += fmt::format("keel_process_instances{{definition=\"{}\",status=\"{}\"}} {}\n",
                                   escape(def), to_string(static_cast<index_status>(i)), row[i]);
    }
    auto histogram = [&](std::string_view name, std::string_view help,
                         duration_histogram definition_metrics::*field) {
        each(name, "histogram", help, [&](const std::string& labels, const definition_metrics& m) {
            (m.*field).render(out, name, labels);
        });
    };
    histogram("keel_process_step_duration_seconds",
              "Time from a step's first attempt to its result (retries included).",
              &definition_metrics::step_seconds);
    counter("keel_process_step_attempts_total", "Attempts of steps.",
            &definition_metrics::step_attempts);
    counter("keel_process_step_retries_total", "Attempts that failed and were retried.",
            &definition_metrics::step_retries);
    histogram("keel_process_signal_resume_seconds",
              "Time from a signal's delivery to the instance taking it.",
              &definition_metrics::signal_resume_seconds);
    histogram("keel_process_timer_lateness_seconds", "How late timers fired after their due time.",
              &definition_metrics::timer_lateness_seconds);
    counter("keel_process_replays_total", "Instances loaded by replaying their journal.",
            &definition_metrics::replays);
    counter("keel_process_replayed_entries_total", "Journal entries replayed.",
            &definition_metrics::replayed_entries);
    each("keel_process_replay_seconds_total", "counter", "Time spent replaying journals.",
         [&](const std::string& labels, const definition_metrics& m) {
             out += fmt::format("keel_process_replay_seconds_total{{{}}} {}\n", labels,
                                static_cast<double>(read(m.replay_ns)) / 1e9);
         });
    counter("keel_process_lease_takeovers_total",
            "Leases this worker took over from a worker that let them expire.",
            &definition_metrics::lease_takeovers);
    counter("keel_process_instances_left_total",
            "Instances this worker gave back to a worker that runs newer code (rolling deploys).",
            &definition_metrics::left);
    header(out, "keel_process_hot_instances", "gauge", "Instances held in this worker's memory.");
    out += fmt::format("keel_process_hot_instances {}\n", hot_.load(std::memory_order_relaxed));
    return out;
}

}  // namespace keel::process
