// The spans the engine records (engine_options::spans): an instance's resumption by a signal
// or a timer, and each attempt of its steps. The signal's span continues the sender's trace
// (inbox_entry::trace); the steps that follow are its children, until the next resumption.

#include "impl.hpp"

namespace keel::process {

using namespace engine_parts;

namespace {

trace::span instance_span(std::string name, const trace::span_context& ctx,
                          const std::string& instance, const std::string& definition,
                          time_point start, time_point end) {
    trace::span s;
    s.context = ctx;
    s.name = std::move(name);
    s.what = trace::span::kind::internal;
    s.start = start;
    s.end = end;
    s.attributes.reserve(4);
    s.attributes.emplace_back("keel.instance", instance);
    s.attributes.emplace_back("keel.definition", definition);
    return s;
}

}  // namespace

void hot_instance::enter(const trace::span_context& s) {
    trace = s;
    if (s.valid()) log = log.with("trace_id", s.trace.hex()).with("span_id", s.span.hex());
}

void engine::impl::trace_resumption(hot_instance& in, std::string what, std::string_view sender,
                                    time_point since) {
    if (!opt.spans) return;
    std::optional<trace::span_context> parent;
    if (!sender.empty()) parent = trace::parse_traceparent(sender);
    if (!parent && in.trace.valid()) parent = in.trace;
    in.enter(parent ? trace::child_of(*parent) : trace::new_root());
    if (!in.trace.sampled || !opt.spans->admit()) return;
    opt.spans->record(
        instance_span(std::move(what), in.trace, in.id, in.definition, since, clock.now()));
}

void engine::impl::trace_start(const hot_instance& in, const trace::span_context& span,
                               time_point since) {
    if (!span.sampled || !opt.spans->admit()) return;
    opt.spans->record(
        instance_span("start " + in.definition, span, in.id, in.definition, since, clock.now()));
}

std::optional<trace::span_context> engine::impl::current_span(const std::string& instance) const {
    auto it = hot.find(instance);
    if (it == hot.end() || !it->second->trace.valid()) return std::nullopt;
    return it->second->trace;
}

trace::span_context engine::impl::attempt_context(const trace::span_context& parent) const {
    if (!opt.spans || (parent.valid() && !parent.sampled)) return {};
    return parent.valid() ? trace::child_of(parent) : trace::new_root();
}

void engine::impl::trace_attempt(const trace::span_context& span, const std::string& instance,
                                 const std::string& definition, std::string what, int attempt,
                                 time_point start, const std::string* error) {
    if (!opt.spans->admit()) return;
    auto s = instance_span(std::move(what), span, instance, definition, start, clock.now());
    s.attributes.emplace_back("keel.step.attempt", std::int64_t{attempt});
    if (error) {
        s.outcome = trace::span::status::error;
        s.message = *error;
    }
    opt.spans->record(std::move(s));
}

}  // namespace keel::process
