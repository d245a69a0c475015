#include "slot_map.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <keel/framework/redis/slot.hpp>

namespace keel::redis::detail {
namespace {

// The value after `name` in a RESP2 map (an array of alternating names and values).
const reply* field(const reply& map, std::string_view name) {
    auto e = map.elements();
    for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
        if (e[i].text() == name) return &e[i + 1];
    }
    return nullptr;
}

std::string_view text_of(const reply* r) {
    return r && r->text() ? *r->text() : std::string_view();
}

std::optional<std::int64_t> number_of(const reply* r) {
    if (!r) return std::nullopt;
    if (auto n = r->integer()) return n;
    std::int64_t n = 0;
    auto t = text_of(r);
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
    if (t.empty() || ec != std::errc{} || end != t.data() + t.size()) return std::nullopt;
    return n;
}

bool valid_slot(std::optional<std::int64_t> s) {
    return s && *s >= 0 && *s < slot_count;
}

std::optional<std::string> node_address(std::string_view host, std::optional<std::int64_t> port,
                                        std::string_view asked) {
    if (!port || *port <= 0 || *port > 65535) return std::nullopt;
    if (host.empty() || host == "?") host = asked;
    return address_of(host, static_cast<std::uint16_t>(*port));
}

void add_node(slot_map& map, const std::string& address) {
    if (std::find(map.nodes.begin(), map.nodes.end(), address) == map.nodes.end())
        map.nodes.push_back(address);
}

// Primaries first in `nodes`, ranges sorted.
slot_map finish(slot_map map, std::vector<std::string> others) {
    std::sort(map.ranges.begin(), map.ranges.end(),
              [](const slot_range& a, const slot_range& b) { return a.first < b.first; });
    for (const auto& r : map.ranges) add_node(map, r.primary);
    for (const auto& o : others) add_node(map, o);
    return map;
}

}  // namespace

std::string slot_map::gaps() const {
    std::string out;
    auto note = [&](int first, int last) {
        if (first > last) return;
        if (!out.empty()) out += ", ";
        out += first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
    };
    int next = 0;
    for (const auto& r : ranges) {
        note(next, static_cast<int>(r.first) - 1);
        next = std::max(next, static_cast<int>(r.last) + 1);
    }
    note(next, slot_count - 1);
    return out;
}

expected<slot_map, std::string> parse_cluster_shards(const reply& r, std::string_view asked) {
    if (!r.is_array()) return unexpected("CLUSTER SHARDS: expected an array");
    slot_map map;
    std::vector<std::string> others;
    for (const auto& shard : r.elements()) {
        const auto* slots = field(shard, "slots");
        const auto* nodes = field(shard, "nodes");
        if (!slots || !nodes) return unexpected("CLUSTER SHARDS: a shard without slots or nodes");
        std::optional<std::string> primary;
        bool primary_online = false;
        for (const auto& node : nodes->elements()) {
            auto host = text_of(field(node, "endpoint"));
            if (host.empty()) host = text_of(field(node, "ip"));
            auto address = node_address(host, number_of(field(node, "port")), asked);
            if (!address) continue;
            bool online = text_of(field(node, "health")) == "online";
            if (text_of(field(node, "role")) == "master" &&
                (!primary || (online && !primary_online))) {
                if (primary) others.push_back(*primary);
                primary = *address;
                primary_online = online;
            } else {
                others.push_back(*address);
            }
        }
        auto bounds = slots->elements();
        for (std::size_t i = 0; i + 1 < bounds.size(); i += 2) {
            auto first = number_of(&bounds[i]), last = number_of(&bounds[i + 1]);
            if (!valid_slot(first) || !valid_slot(last) || *first > *last)
                return unexpected("CLUSTER SHARDS: a slot range out of bounds");
            if (!primary) continue;  // a shard that lost its primary serves nothing
            map.ranges.push_back(
                {static_cast<std::uint16_t>(*first), static_cast<std::uint16_t>(*last), *primary});
        }
    }
    return finish(std::move(map), std::move(others));
}

expected<slot_map, std::string> parse_cluster_slots(const reply& r, std::string_view asked) {
    if (!r.is_array()) return unexpected("CLUSTER SLOTS: expected an array");
    slot_map map;
    std::vector<std::string> others;
    for (const auto& entry : r.elements()) {
        auto e = entry.elements();
        if (e.size() < 3) return unexpected("CLUSTER SLOTS: an entry without a primary");
        auto first = number_of(&e[0]), last = number_of(&e[1]);
        if (!valid_slot(first) || !valid_slot(last) || *first > *last)
            return unexpected("CLUSTER SLOTS: a slot range out of bounds");
        std::vector<std::string> addresses;
        for (std::size_t i = 2; i < e.size(); ++i) {
            auto node = e[i].elements();
            if (node.size() < 2) return unexpected("CLUSTER SLOTS: a node without an address");
            auto address = node_address(text_of(&node[0]), number_of(&node[1]), asked);
            if (!address) return unexpected("CLUSTER SLOTS: a node with a bad port");
            addresses.push_back(std::move(*address));
        }
        map.ranges.push_back(
            {static_cast<std::uint16_t>(*first), static_cast<std::uint16_t>(*last), addresses[0]});
        others.insert(others.end(), addresses.begin() + 1, addresses.end());
    }
    return finish(std::move(map), std::move(others));
}

std::optional<redirection> parse_redirection(std::string_view message) {
    redirection out;
    if (message.starts_with("MOVED ")) {
        message.remove_prefix(6);
    } else if (message.starts_with("ASK ")) {
        out.ask = true;
        message.remove_prefix(4);
    } else {
        return std::nullopt;
    }
    auto space = message.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    unsigned slot = 0;
    auto [end, ec] = std::from_chars(message.data(), message.data() + space, slot);
    if (ec != std::errc{} || end != message.data() + space || slot >= slot_count)
        return std::nullopt;
    out.slot = static_cast<std::uint16_t>(slot);
    out.address = message.substr(space + 1);
    if (out.address.empty()) return std::nullopt;
    return out;
}

std::string address_of(std::string_view host, std::uint16_t port) {
    return fmt::format("{}:{}", host, port);
}

std::optional<endpoint> endpoint_of(std::string_view address, const endpoint& credentials) {
    auto colon = address.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    unsigned port = 0;
    auto digits = address.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535)
        return std::nullopt;
    endpoint ep = credentials;
    ep.kind = endpoint::transport::tcp;
    ep.host = address.substr(0, colon);
    ep.port = static_cast<std::uint16_t>(port);
    ep.db = 0;
    return ep;
}

}  // namespace keel::redis::detail
