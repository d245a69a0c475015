#include "cluster.hpp"

#include <fmt/format.h>

#include <boost/asio/append.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/framework/redis/slot.hpp>

#include "node.hpp"

namespace keel::redis::detail {

using boost::system::error_code;

namespace {

constexpr int max_redirections = 16;
constexpr std::chrono::milliseconds backoff_ceiling{250};

std::string display_of(const std::vector<endpoint>& seeds) {
    std::string out = "redis-cluster://";
    for (const auto& s : seeds) {
        if (&s != &seeds.front()) out += ',';
        out += s.host.find(':') == std::string::npos ? s.host : "[" + s.host + "]";
        out += fmt::format(":{}", s.port);
    }
    return out;
}

}  // namespace

cluster_impl::cluster_impl(asio::any_io_executor executor, connection_options options,
                           std::vector<endpoint> seeds, std::shared_ptr<write_refusals> refusals)
    : executor_(std::move(executor)),
      options_(std::move(options)),
      seeds_(std::move(seeds)),
      refusals_(std::move(refusals)),
      log_(log::logger("redis").with("redis", display_of(seeds_))),
      park_timer_(executor_),
      refresh_signal_(executor_),
      slots_(slot_count, nullptr) {
    park_timer_.expires_at(steady::time_point::max());
}

void cluster_impl::start() {
    auto self = shared_from_this();
    drop_pending_at_shutdown(executor_, self);
    asio::co_spawn(executor_, refresh_loop(),
                   [self](std::exception_ptr e) { self->on_loop_end(e); });
    asio::co_spawn(executor_, park_loop(), [self](std::exception_ptr e) { self->on_loop_end(e); });
}

void cluster_impl::drop_pending() {
    auto requests = std::move(requests_);
    requests_.clear();
    parked_.clear();
}

void cluster_impl::on_loop_end(std::exception_ptr e) {
    if (!e) return;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        log_.error("redis cluster loop failed: {}", ex.what());
    }
}

// --- requests ----------------------------------------------------------------------------

void cluster_impl::submit(std::string payload, std::chrono::milliseconds timeout, const script* s,
                          connection::handler_type handler, std::optional<route> to,
                          std::uint64_t session) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto deadline = steady::time_point::max();
    auto patience = timeout;
    if (timeout == std::chrono::milliseconds::zero()) timeout = options_.request_timeout;
    if (timeout > std::chrono::milliseconds::zero()) deadline = steady::now() + timeout;
    auto id = next_id_.fetch_add(1, std::memory_order_relaxed);
    accepted_.fetch_add(1, std::memory_order_relaxed);
    if (slot.is_connected()) {
        slot.assign([weak = weak_from_this(), id](asio::cancellation_type) {
            if (auto self = weak.lock())
                asio::dispatch(self->executor_, [self, id] { self->cancel(id); });
        });
    }
    asio::dispatch(executor_, [self = shared_from_this(), id, payload = std::move(payload),
                               handler = std::move(handler), deadline, s, to = std::move(to),
                               patience, session]() mutable {
        self->start_request(id, std::move(payload), std::move(handler), deadline, s, std::move(to),
                            patience, session);
    });
}

void cluster_impl::start_request(std::uint64_t id, std::string payload,
                                 connection::handler_type handler, steady::time_point deadline,
                                 const script* s, std::optional<route> to,
                                 std::chrono::milliseconds patience, std::uint64_t session) {
    auto refuse = [&](errc code, std::string why) {
        asio::post(executor_, asio::append(std::move(handler),
                                           result(unexpected(error{code, std::move(why)}))));
    };
    if (closed_) return refuse(errc::closed, "the connection was closed");
    auto where = to ? std::move(*to) : route_of(payload);
    if (where.what == route::kind::cross_slot) return refuse(errc::cross_slot, where.why);
    if (where.what == route::kind::unsupported) return refuse(errc::unsupported, where.why);
    auto [it, _] = requests_.try_emplace(id, std::move(payload), std::move(handler), deadline, s,
                                         std::move(where));
    it->second.patience = patience;
    it->second.session = session;
    outstanding_.fetch_add(1, std::memory_order_relaxed);
    send(id, it->second);
}

void cluster_impl::send(std::uint64_t id, request& rq) {
    if (steady::now() >= rq.deadline) return expire(id, rq);
    if (rq.to.what == route::kind::all && rq.fixed_node.empty()) return fan_out(id, rq);
    auto* target = target_of(rq);
    if (!target) {
        if (!rq.fixed_node.empty() || !rq.ask_address.empty())
            return finish(id, rq,
                          unexpected(error{errc::not_connected,
                                           fmt::format("bad node address '{}'",
                                                       rq.fixed_node + rq.ask_address)}));
        auto what = rq.to.what == route::kind::slot ? fmt::format("slot {}", rq.to.slot)
                                                    : std::string("any slot");
        rq.last_error =
            error{errc::not_connected,
                  fmt::format("no primary serves {} ({})", what,
                              refresh_error_.empty() ? "the slot map is loading" : refresh_error_)};
        request_refresh();
        return park(id, rq, steady::time_point::max());
    }
    rq.parked = false;
    rq.at = target->conn;
    rq.at_address = target->address;
    auto attempt = ++rq.attempt;
    // Weak: a node's queue must not keep the router alive (and the router its nodes).
    auto handler = connection::handler_type(
        asio::bind_executor(executor_, [weak = weak_from_this(), id, attempt](result r) {
            if (auto self = weak.lock()) self->on_reply(id, attempt, std::move(r));
        }));
    rq.at_id = send_to_node(*target->conn, std::string(rq.payload), rq.deadline, std::move(handler),
                            !rq.ask_address.empty(), rq.patience, rq.session);
}

// A command for every primary: one part per primary; the answer is the first error, else
// the first reply.
void cluster_impl::fan_out(std::uint64_t id, request& rq) {
    if (primaries_.empty()) {
        rq.last_error = error{errc::not_connected,
                              refresh_error_.empty() ? "the slot map is loading" : refresh_error_};
        request_refresh();
        return park(id, rq, steady::time_point::max());
    }
    rq.parked = false;
    rq.parts_left = primaries_.size();
    auto targets = primaries_;
    for (auto* n : targets) {
        auto part_id = next_id_.fetch_add(1, std::memory_order_relaxed);
        auto [it, _] = requests_.try_emplace(part_id, rq.payload, connection::handler_type(),
                                             rq.deadline, nullptr, route{route::kind::any});
        it->second.fixed_node = n->address;
        it->second.parent = id;
        send(part_id, it->second);
    }
}

cluster_impl::node* cluster_impl::target_of(request& rq) {
    if (!rq.ask_address.empty()) return ensure_node(rq.ask_address);
    if (!rq.fixed_node.empty()) return ensure_node(rq.fixed_node);
    if (rq.session != 0) {
        // replicate's WAIT counts the writes of the socket it is sent on: it goes to the node
        // whose socket made the write, even if the write's slot has moved since. When that
        // socket is gone, the slot's node refuses it (another session): not replicated.
        for (auto& [address, n] : nodes_)
            if (n.conn && node_session(*n.conn) == rq.session) return &n;
    }
    if (rq.to.what == route::kind::slot) return slots_[rq.to.slot];
    return pick_any();
}

// A connected primary, in turn; any primary when none is connected (it fails fast).
cluster_impl::node* cluster_impl::pick_any() {
    if (primaries_.empty()) return nullptr;
    for (std::size_t i = 0; i < primaries_.size(); ++i) {
        auto* n = primaries_[next_any_++ % primaries_.size()];
        if (node_connected(*n->conn)) return n;
    }
    return primaries_[next_any_++ % primaries_.size()];
}

void cluster_impl::on_reply(std::uint64_t id, std::uint64_t attempt, result r) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.attempt != attempt || it->second.parked) return;
    auto& rq = it->second;
    if (r) return finish(id, rq, std::move(r));
    auto asked = std::exchange(rq.ask_address, std::string());
    auto code = r.error().code;
    if (code == errc::server_error)
        return on_server_error(id, rq, std::move(r).error(), std::move(asked));
    if (code == errc::not_connected && rq.fixed_node.empty()) {
        // Never written: its node is down. Wait for a map that names another primary.
        rq.last_error = std::move(r).error();
        request_refresh();
        return park(id, rq, steady::time_point::max());
    }
    if (code == errc::connection_lost) request_refresh();
    finish(id, rq, std::move(r));
}

void cluster_impl::on_server_error(std::uint64_t id, request& rq, error e, std::string asked) {
    auto code = e.server_code();
    if (code == "MOVED" || code == "ASK") {
        auto to = parse_redirection(e.message);
        if (!to || ++rq.redirections > max_redirections)
            return finish(id, rq, unexpected(std::move(e)));
        if (to->address.starts_with(':'))  // "the host you asked", when Redis has no endpoint
            to->address = rq.at_address.substr(0, rq.at_address.rfind(':')) + to->address;
        redirections_.fetch_add(1, std::memory_order_relaxed);
        if (to->ask)
            rq.ask_address = std::move(to->address);
        else
            moved(to->slot, to->address);
        return send(id, rq);
    }
    if (code == "TRYAGAIN" || code == "CLUSTERDOWN" || code == "LOADING") {
        if (code == "CLUSTERDOWN") request_refresh();
        auto delay = retry_delay(rq.retries++);
        rq.last_error = std::move(e);
        return park(id, rq, steady::now() + delay);
    }
    if (code == "NOSCRIPT" && rq.eval_script) {
        rq.payload = evalsha_to_eval(rq.payload, *rq.eval_script);
        rq.eval_script = nullptr;
        rq.ask_address = std::move(asked);
        return send(id, rq);
    }
    finish(id, rq, unexpected(std::move(e)));
}

void cluster_impl::finish(std::uint64_t id, request& rq, result r) {
    auto parent = rq.parent;
    auto handler = std::move(rq.handler);
    requests_.erase(id);
    if (parent) return on_part_done(parent, std::move(r));
    outstanding_.fetch_sub(1, std::memory_order_relaxed);
    asio::post(executor_, asio::append(std::move(handler), std::move(r)));
}

void cluster_impl::on_part_done(std::uint64_t parent, result r) {
    auto it = requests_.find(parent);
    if (it == requests_.end()) return;
    auto& rq = it->second;
    if (!rq.outcome || (!r && *rq.outcome)) rq.outcome.emplace(std::move(r));
    if (--rq.parts_left > 0) return;
    auto outcome = std::move(*rq.outcome);
    finish(parent, rq, std::move(outcome));
}

void cluster_impl::expire(std::uint64_t id, request& rq) {
    auto why = rq.last_error.value_or(
        error{errc::timeout,
              fmt::format("no reply from {} within the request timeout", display_of(seeds_))});
    finish(id, rq, unexpected(std::move(why)));
}

void cluster_impl::cancel(std::uint64_t id) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return;
    auto& rq = it->second;
    if (rq.at && !rq.parked) cancel_on_node(*rq.at, rq.at_id);
    finish(id, rq, unexpected(error{errc::cancelled, "request cancelled"}));
}

// --- parked requests -------------------------------------------------------------------

void cluster_impl::park(std::uint64_t id, request& rq, steady::time_point retry_at) {
    rq.parked = true;
    rq.retry_at = retry_at;
    parked_.push_back(id);
    arm_park(std::min(rq.deadline, retry_at));
}

void cluster_impl::arm_park(steady::time_point when) {
    if (when >= park_armed_) return;
    park_armed_ = when;
    park_timer_.expires_at(when);  // wakes park_loop, which re-reads the expiry
}

// Sends again what may go now (its backoff passed, or the map was just refreshed) and
// answers what is past its deadline.
void cluster_impl::resend_parked(bool refreshed) {
    auto ids = std::move(parked_);
    parked_.clear();
    park_armed_ = steady::time_point::max();
    park_timer_.expires_at(park_armed_);
    auto now = steady::now();
    for (auto id : ids) {
        auto it = requests_.find(id);
        if (it == requests_.end() || !it->second.parked) continue;
        auto& rq = it->second;
        bool due = rq.retry_at <= now || (refreshed && rq.retry_at == steady::time_point::max());
        if (rq.deadline <= now) {
            expire(id, rq);
        } else if (due) {
            rq.parked = false;
            send(id, rq);
        } else {
            parked_.push_back(id);
            arm_park(std::min(rq.deadline, rq.retry_at));
        }
    }
}

asio::awaitable<void> cluster_impl::park_loop() {
    while (!closed_) {
        error_code ec;
        co_await park_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (closed_) break;
        if (ec && park_timer_.expiry() > steady::now()) continue;  // re-armed
        resend_parked(false);
    }
}

std::chrono::milliseconds cluster_impl::backoff_cap() const {
    return std::max(std::chrono::milliseconds(1),
                    std::min(options_.reconnect_max, backoff_ceiling));
}

std::chrono::milliseconds cluster_impl::retry_delay(int retries) const {
    auto delay = std::max(std::chrono::milliseconds(1), options_.reconnect_min);
    for (int i = 0; i < retries && delay < backoff_cap(); ++i) delay *= 2;
    return std::min(delay, backoff_cap());
}

// --- the slot map ----------------------------------------------------------------------

void cluster_impl::request_refresh() {
    if (refresh_wanted_) return;
    refresh_wanted_ = true;
    refresh_signal_.cancel();
}

// Refreshes when asked, at most once per `gap`: reconnect_min after a refresh that changed
// the map, doubling (up to backoff_cap) while refreshes find nothing new, as when a primary
// is down and its replica not yet promoted.
asio::awaitable<void> cluster_impl::refresh_loop() {
    auto gap = std::max(std::chrono::milliseconds(1), options_.reconnect_min);
    while (!closed_) {
        auto earliest = last_refresh_ + gap;
        if (!refresh_wanted_ || steady::now() < earliest) {
            error_code ec;
            refresh_signal_.expires_at(refresh_wanted_ ? earliest : steady::time_point::max());
            co_await refresh_signal_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            continue;
        }
        refresh_wanted_ = false;
        auto changed = co_await refresh();
        if (closed_) break;
        last_refresh_ = steady::now();
        refreshes_.fetch_add(1, std::memory_order_relaxed);
        gap = changed ? std::max(std::chrono::milliseconds(1), options_.reconnect_min)
                      : std::min(gap * 2, backoff_cap());
        resend_parked(true);
    }
}

// Asks the nodes in turn for the map; the first answer wins. True if the map changed.
asio::awaitable<bool> cluster_impl::refresh() {
    std::string failures;
    for (const auto& address : refresh_candidates()) {
        auto* n = ensure_node(address);
        if (!n) continue;
        auto conn = n->conn;
        auto host = endpoint_of(address, seeds_.front())->host;
        auto deadline = steady::now() + options_.connect_timeout;
        auto shards = command("CLUSTER", "SHARDS").payload();
        auto r = co_await query(conn, std::move(shards), deadline);
        if (closed_) co_return false;
        std::optional<expected<slot_map, std::string>> map;
        if (r) {
            map.emplace(parse_cluster_shards(*r, host));
        } else if (r.error().code == errc::server_error) {  // before Redis 7
            auto slots_payload = command("CLUSTER", "SLOTS").payload();
            auto slots = co_await query(conn, std::move(slots_payload), deadline);
            if (closed_) co_return false;
            if (slots)
                map.emplace(parse_cluster_slots(*slots, host));
            else
                r = std::move(slots);
        }
        std::string why;
        if (!map)
            why = r.error().message;
        else if (!*map)
            why = map->error();
        else if ((*map)->ranges.empty())
            why = "it serves no slots (not part of a cluster yet?)";
        if (why.empty()) {
            if (!refresh_error_.empty()) log_.info("slot map loaded from {}", address);
            refresh_error_.clear();
            co_return apply(**map);
        }
        failures += fmt::format("{}{}: {}", failures.empty() ? "" : "; ", address, why);
    }
    if (failures != refresh_error_) log_.warn("cannot load the slot map: {}", failures);
    refresh_error_ = std::move(failures);
    co_return false;
}

asio::awaitable<result> cluster_impl::query(std::shared_ptr<connection_impl> conn,
                                            std::string payload, steady::time_point deadline) {
    co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(result)>(
        [&conn, deadline](auto handler, std::string payload) {
            send_to_node(*conn, std::move(payload), deadline,
                         connection::handler_type(std::move(handler)), false);
        },
        asio::use_awaitable, std::move(payload));
}

// Connected primaries first, then the other nodes of the last map, then the seeds.
std::vector<std::string> cluster_impl::refresh_candidates() const {
    std::vector<std::string> out;
    auto add = [&](const std::string& a) {
        if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    };
    for (auto* n : primaries_)
        if (node_connected(*n->conn)) add(n->address);
    for (const auto& a : known_) add(a);
    for (const auto& s : seeds_) add(address_of(s.host, s.port));
    return out;
}

bool cluster_impl::apply(const slot_map& map) {
    std::vector<node*> table(slot_count, nullptr);
    std::vector<node*> primaries;
    for (const auto& range : map.ranges) {
        auto* n = ensure_node(range.primary);
        if (!n) continue;
        std::fill(table.begin() + range.first, table.begin() + range.last + 1, n);
        if (std::find(primaries.begin(), primaries.end(), n) == primaries.end())
            primaries.push_back(n);
    }
    bool changed = table != slots_;
    std::lock_guard lock(state_mutex_);
    slots_ = std::move(table);
    primaries_ = std::move(primaries);
    known_ = map.nodes;
    for (auto& [_, n] : nodes_) n.primary = false;
    for (auto* n : primaries_) n->primary = true;
    // Close the connections of nodes that serve nothing now, once they are idle.
    for (auto it = nodes_.begin(); it != nodes_.end();) {
        if (!it->second.primary && node_stats(*it->second.conn).outstanding == 0) {
            close_node(*it->second.conn);
            it = nodes_.erase(it);
        } else {
            ++it;
        }
    }
    uncovered_ = map.gaps();
    if (changed) {
        std::string names;
        for (auto* n : primaries_) names += (names.empty() ? "" : ", ") + n->address;
        log_.info("slot map: primaries {}{}", names,
                  uncovered_.empty() ? "" : "; no primary serves slots " + uncovered_);
    }
    return changed;
}

void cluster_impl::moved(std::uint16_t slot, const std::string& address) {
    if (auto* n = ensure_node(address)) slots_[slot] = n;
    request_refresh();
}

cluster_impl::node* cluster_impl::ensure_node(const std::string& address) {
    if (auto it = nodes_.find(address); it != nodes_.end()) return &it->second;
    auto where = endpoint_of(address, seeds_.front());
    if (!where) return nullptr;
    auto conn = open_node(executor_, options_, std::move(*where), scripts_, refusals_);
    std::lock_guard lock(state_mutex_);
    auto [it, _] = nodes_.emplace(address, node{address, std::move(conn), false});
    return &it->second;
}

// --- the rest of the connection API ----------------------------------------------------

void cluster_impl::add_script(const script& s) {
    asio::dispatch(executor_, [self = shared_from_this(), s] {
        self->scripts_.push_back(s);
        for (auto& [_, n] : self->nodes_) add_node_script(*n.conn, s);
    });
}

void cluster_impl::close() {
    asio::dispatch(executor_, [self = shared_from_this()] {
        if (self->closed_) return;
        self->closed_ = true;
        self->park_timer_.cancel();
        self->refresh_signal_.cancel();
        std::vector<std::uint64_t> ids;
        for (const auto& [id, rq] : self->requests_)
            if (!rq.parent) ids.push_back(id);
        for (auto id : ids) {
            auto it = self->requests_.find(id);
            if (it != self->requests_.end())
                self->finish(id, it->second,
                             unexpected(error{errc::closed, "the connection was closed"}));
        }
        std::lock_guard lock(self->state_mutex_);
        for (auto& [_, n] : self->nodes_) close_node(*n.conn);
    });
}

bool cluster_impl::connected() const {
    std::lock_guard lock(state_mutex_);
    if (!uncovered_.empty()) return false;
    for (const auto& [_, n] : nodes_)
        if (n.primary && !node_connected(*n.conn)) return false;
    return true;
}

std::string cluster_impl::uncovered() const {
    std::lock_guard lock(state_mutex_);
    return uncovered_;
}

connection_stats cluster_impl::stats() const {
    connection_stats out;
    out.requests = accepted_.load();
    out.outstanding = outstanding_.load();
    out.redirections = redirections_.load();
    out.refreshes = refreshes_.load();
    out.connected = connected();
    std::lock_guard lock(state_mutex_);
    for (const auto& [_, n] : nodes_) {
        auto s = node_stats(*n.conn);
        out.writes += s.writes;
        out.replies += s.replies;
        out.connects += s.connects;
    }
    return out;
}

}  // namespace keel::redis::detail
