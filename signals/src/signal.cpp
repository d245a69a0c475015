#include <keel/framework/digest.hpp>
#include <keel/signals/signal.hpp>

namespace keel::signals {

signal_base::signal_base(signal_group* group, std::string_view pattern,
                         std::vector<std::string_view> models)
    : group_(group), pattern_(pattern), models_(std::move(models)) {
    if (!group_) throw std::invalid_argument("signal " + std::string(pattern) + ": no group");
    group_->signals_.push_back(this);
}

emitter& signal_base::attached_emitter() const {
    emitter* target = group_->get_emitter();
    if (!target)
        throw emit_error("signal " + std::string(pattern_) +
                         ": its group is not attached to a process engine (register a process "
                         "that injects the group, or call engine::attach)");
    return *target;
}

emit_request signal_base::request_for(std::vector<std::string> values, nlohmann::json payload,
                                      emit_options options) const {
    std::string path;
    try {
        path = fill_pattern(pattern_, values, "signal");
    } catch (const std::invalid_argument& e) {
        throw emit_error(e.what());
    }
    auto subscriptions = subscription_keys(pattern_, values);
    return emit_request{std::move(path),
                        std::move(subscriptions),
                        std::move(payload),
                        std::move(options.key),
                        {},
                        std::move(options.trace)};
}

asio::awaitable<emit_result> signal_base::emit_values(std::vector<std::string> values,
                                                      nlohmann::json payload,
                                                      emit_options options) const {
    emitter& target = attached_emitter();
    auto req = request_for(std::move(values), std::move(payload), std::move(options));
    co_return co_await target.emit(std::move(req));
}

asio::awaitable<emit_result> signal_base::emit_json(std::string path, nlohmann::json payload,
                                                    emit_options options) const {
    std::vector<std::string> values;
    if (!match_pattern(pattern_, path, values))
        throw emit_error("path " + path + " does not match signal " + std::string(pattern_));
    if (auto why = check_payload(payload))
        throw emit_error("signal " + std::string(pattern_) +
                         ": the payload does not parse: " + *why);
    co_return co_await emit_values(std::move(values), std::move(payload), std::move(options));
}

const signal_base* signal_group::find(std::string_view path,
                                      std::vector<std::string>& values) const {
    for (const auto* s : signals_)
        if (match_pattern(s->pattern(), path, values)) return s;
    return nullptr;
}

namespace detail {
std::string entity_id(const std::string& id, bool lost, std::string_view model) {
    if (lost)
        throw emit_error("the lock on " + std::string(model) + " " + id +
                         " was lost: not emitting on its behalf");
    return id;
}
}  // namespace detail

std::string scoped_key(std::string_view path, std::string_view key) {
    if (key.empty()) return {};
    if (key.size() > max_key_bytes)
        throw emit_error("idempotency key of " + std::to_string(key.size()) + " bytes; at most " +
                         std::to_string(max_key_bytes) + " are allowed");
    auto readable = std::to_string(key.size()) + ":" + std::string(key) + " " + std::string(path);
    if (readable.size() <= 128) return readable;
    std::string both(path);
    both += '\0';
    both += key;
    return "sha256:" + sha256_hex(both);
}

std::string subscription_key(std::string_view pattern,
                             const std::vector<std::optional<std::string>>& bound) {
    std::vector<std::string> values;
    values.reserve(bound.size());
    for (const auto& b : bound) values.push_back(b.value_or("*"));
    return fill_pattern(pattern, values, "signal");
}

std::vector<std::string> subscription_keys(std::string_view pattern,
                                           const std::vector<std::string>& values) {
    std::vector<std::string> keys;
    const std::size_t n = values.size();
    if (n == 0) return {std::string(pattern)};
    if (n > 8) throw emit_error("signal " + std::string(pattern) + ": too many parameters");
    // Mask bit i set: parameter i is '*'. The all-'*' key is never subscribed (a process
    // receives a signal with parameters only if it binds at least one of them).
    for (unsigned mask = 0; mask + 1 < (1u << n); ++mask) {
        std::vector<std::optional<std::string>> bound(n);
        for (std::size_t i = 0; i < n; ++i)
            if (!(mask & (1u << i))) bound[i] = values[i];
        keys.push_back(subscription_key(pattern, bound));
    }
    return keys;
}

}  // namespace keel::signals
