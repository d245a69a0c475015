// Child processes: the outcome signal a child sends its parent, and the parent's start step.

#include <keel/process/child.hpp>
#include <keel/process/context.hpp>
#include <keel/process/detail/runtime.hpp>
#include <keel/process/journal.hpp>
#include <keel/process/lineage.hpp>
#include <set>

namespace keel::process {

namespace {

std::string describe(const std::string& child, instance_status status, const std::string& error) {
    if (status == instance_status::cancelled) return "child process " + child + " was cancelled";
    return "child process " + child + " failed: " + error;
}

}  // namespace

child_failed::child_failed(std::string child, instance_status status, std::string error)
    : std::runtime_error(describe(child, status, error)),
      child_(std::move(child)),
      status_(status),
      error_(std::move(error)) {}

std::string child_path(std::string_view child_id) {
    std::string path = "/keel/child/";
    path += child_id;
    return path;
}

nlohmann::json child_outcome(instance_status status, const std::optional<nlohmann::json>& result,
                             const std::optional<std::string>& error) {
    nlohmann::json out{{"status", to_string(status)}};
    if (status == instance_status::completed)
        out["result"] = result.value_or(nlohmann::json());
    else
        out["error"] = error.value_or(std::string(to_string(status)));
    return out;
}

durable<void> context::start_child(std::string definition, std::string id, nlohmann::json params,
                                   child_options options) {
    // The partition is the caller's view: the step keeps its own copy.
    auto body = [rt = rt_, definition = std::move(definition), id, params = std::move(params),
                 options, partition = std::string(options.partition)] {
        auto owned = options;
        owned.partition = partition;
        return detail::runtime::start_child(rt, definition, id, params, owned);
    };
    auto step = run("start " + id, std::move(body));
    co_await step;
    if (!options.detached) rt_->note_child(std::move(id), options.on_parent_close);
}

durable<bool> context::deliver(std::string instance, std::string path, nlohmann::json payload) {
    // The step's own seq makes the key: a replay, or the step run again after a crash before
    // its commit, delivers a duplicate, which the receiver's inbox drops.
    auto key = id() + "#" + std::to_string(rt_->upcoming_seq());
    auto name = "deliver " + path + " to " + instance;
    auto body = [rt = rt_, instance = std::move(instance), path = std::move(path),
                 payload = std::move(payload), key = std::move(key)] {
        return detail::runtime::deliver(rt, instance, path, payload, key);
    };
    auto step = run(std::move(name), std::move(body));
    auto reached = co_await step;
    co_return reached.get<bool>();
}

std::vector<started_child> children_started(std::span<const journal_entry> journal) {
    std::vector<started_child> out;
    std::set<std::string, std::less<>> joined;
    auto prefix = child_path("");
    for (const auto& e : journal) {
        if (e.kind == op_kind::signal && e.name.starts_with(prefix)) {
            joined.insert(e.name.substr(prefix.size()));
            continue;
        }
        // The start step's value names the child: {"child", "close"} (start_child below).
        if (e.kind != op_kind::run || e.failed || !e.name.starts_with("start ")) continue;
        const auto& v = e.value;
        if (!v.is_object() || !v.contains("child") || !v["child"].is_string()) continue;
        auto close = v.value("close", std::string("cancel")) == "abandon" ? parent_close::abandon
                                                                          : parent_close::cancel;
        out.push_back({v["child"].get<std::string>(), close});
    }
    for (auto& c : out) c.joined = joined.contains(c.id);
    return out;
}

namespace detail {

nlohmann::json completed_result(const std::string& child, const nlohmann::json& outcome) {
    auto status = parse_instance_status(outcome.value("status", std::string()));
    if (status == instance_status::completed) return outcome.value("result", nlohmann::json());
    if (!status || (*status != instance_status::failed && *status != instance_status::cancelled))
        throw bad_signal_payload("child process " + child + " sent an outcome without a status");
    throw child_failed(child, *status, outcome.value("error", std::string()));
}

asio::awaitable<nlohmann::json> runtime::start_child(runtime* rt, std::string definition,
                                                     std::string id, nlohmann::json params,
                                                     child_options options) {
    if (!rt->calls_)
        throw terminal_error("process " + rt->id() + " cannot start child " + id +
                             ": it does not run in an engine");
    co_await rt->calls_->start(std::move(definition), id, std::move(params), options);
    if (options.detached) co_return nlohmann::json{{"started", id}};
    auto close = options.on_parent_close == parent_close::cancel ? "cancel" : "abandon";
    co_return nlohmann::json{{"child", id}, {"close", close}};
}

bool runtime::may_restart(runtime* rt) {
    if (!rt->calls_)
        throw terminal_error("process " + rt->id() +
                             " cannot continue as new: it does not run in an engine");
    return rt->calls_->may_restart();
}

asio::awaitable<nlohmann::json> runtime::deliver(runtime* rt, std::string instance,
                                                 std::string path, nlohmann::json payload,
                                                 std::string key) {
    if (!rt->calls_)
        throw terminal_error("process " + rt->id() + " cannot deliver to " + instance +
                             ": it does not run in an engine");
    co_return co_await rt->calls_->deliver(std::move(instance), std::move(path), std::move(payload),
                                           std::move(key));
}

void runtime::note_child(std::string id, parent_close on_close) {
    for (auto& c : children_)
        if (c.id == id) {
            c.on_close = on_close;
            return;
        }
    children_.push_back({std::move(id), on_close});
}

void runtime::note_joined(std::string_view id) noexcept {
    for (auto& c : children_)
        if (c.id == id) c.joined = true;
}

}  // namespace detail

}  // namespace keel::process
