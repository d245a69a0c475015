// Child processes (context::start): starting them, telling a parent how its child ended,
// and cancelling the children an ending parent leaves (parent_close::cancel); and the other
// calls a step makes of the engine, a delivery (context::deliver) and an answer
// (context::reply).

#include <keel/process/child.hpp>
#include <keel/process/lineage.hpp>

#include "impl.hpp"

namespace keel::process {

namespace {

using child_record = detail::runtime::child_record;

// A child tells its parent how it ended, and a queued one gives its slot back; a worker of a
// build before child processes and queues would run the child and do neither. While one is
// alive (a rolling upgrade of Keel), the start waits for it to leave, as of each heartbeat;
// the parent holds its lease meanwhile.
asio::awaitable<std::shared_ptr<engine::impl>> until_no_worker_below(
    std::weak_ptr<engine::impl> engine, std::uint32_t level, const std::string& parent,
    const std::string& child) {
    for (bool waited = false;; waited = true) {
        auto self = engine.lock();
        if (!self) throw std::runtime_error("the engine stopped");
        const auto* old = self->worker_below(level);
        if (!old) co_return self;
        if (!waited)
            self->log.warn(
                "process {}: child {} waits to start until worker {} (a Keel build before "
                "child processes and queues, which would not tell the parent how the child "
                "ended) leaves",
                parent, child, old->worker);
        auto until = self->clock.now() + self->opt.heartbeat;
        auto& clock = self->clock;
        auto ex = self->ex;
        self.reset();  // not kept alive by a waiting step
        co_await clock.async_wait_until(ex, until, asio::use_awaitable);
    }
}

asio::awaitable<void> start_for(std::weak_ptr<engine::impl> engine, std::string parent,
                                std::string definition, std::string id, nlohmann::json params,
                                child_options options, std::optional<trace::span_context> caller) {
    std::shared_ptr<engine::impl> self;
    if (!parent.empty())
        self = co_await until_no_worker_below(engine, store_level_children, parent, id);
    else if (options.on_queue)  // detached, but queued
        self = co_await until_no_worker_below(engine, store_level_queues, parent, id);
    else
        self = engine.lock();
    if (!self) throw std::runtime_error("the engine stopped");
    if (!options.on_queue) {
        co_await self->start_child(std::move(definition), std::move(id), std::move(params),
                                   std::move(parent), std::move(caller));
        co_return;
    }
    enqueue_options queueing{std::string(options.partition), options.priority, {}};
    queueing.trace = std::move(caller);
    try {
        co_await self->enqueue(options.on_queue->name, std::move(queueing), std::move(definition),
                               std::move(id), std::move(params), std::move(parent));
    } catch (const std::invalid_argument& e) {
        throw terminal_error(e.what());  // an unknown queue or bad options: not transient
    }
}

asio::awaitable<bool> deliver_for(std::weak_ptr<engine::impl> engine, std::string instance,
                                  std::string path, nlohmann::json payload, std::string key) {
    auto self = engine.lock();
    if (!self) throw std::runtime_error("the engine stopped");
    auto d = co_await self->deliver_to(std::move(instance), std::move(path), std::move(payload),
                                       std::move(key));
    co_return d.result == delivery::outcome::stored || d.result == delivery::outcome::duplicate;
}

asio::awaitable<void> answer_for(std::weak_ptr<engine::impl> engine, std::string instance,
                                 std::string request, nlohmann::json answer) {
    auto self = engine.lock();
    if (!self) throw std::runtime_error("the engine stopped");
    co_await self->st.put_answer(instance, request, std::move(answer), self->opt.answer_retention);
    self->answered(instance, request);
}

std::string permit_holder(const std::string& instance, std::uint64_t seq) {
    return instance + "#" + std::to_string(seq);
}

// Asks the store until it grants, sleeping on the engine's clock as it says; the step shows
// the limit it waits for meanwhile (steps_in_flight).
asio::awaitable<void> take_permit_for(std::weak_ptr<engine::impl> engine, std::string instance,
                                      limit l, std::uint64_t seq) {
    auto holder = permit_holder(instance, seq);
    for (bool waited = false;; waited = true) {
        auto self = engine.lock();
        if (!self) throw std::runtime_error("the engine stopped");
        auto answer = co_await self->st.acquire_permit(l, holder, self->clock.now());
        self->note_waiting(instance, seq, answer.granted ? std::string() : describe(l));
        if (answer.granted) co_return;
        if (!waited)
            self->log.debug("process {}: step {} waits for limit {}", instance, seq, describe(l));
        auto until =
            self->clock.now() + std::min<duration>(answer.retry_after, std::chrono::seconds(1));
        auto& clock = self->clock;
        auto ex = self->ex;
        self.reset();  // not kept alive by a sleeping step
        co_await clock.async_wait_until(ex, until, asio::use_awaitable);
    }
}

asio::awaitable<void> give_permit_for(std::weak_ptr<engine::impl> engine, std::string instance,
                                      std::string l, std::uint64_t seq) {
    auto self = engine.lock();
    if (!self) co_return;  // its hold ends by itself
    try {
        co_await self->st.release_permit(l, permit_holder(instance, seq));
    } catch (const std::exception& e) {
        self->log.warn(
            "process {}: could not give back a permit of limit {} ({}); it is free "
            "again when its hold ends",
            instance, l, e.what());
    }
}

}  // namespace

std::vector<child_record> engine_parts::children_in(const std::vector<journal_entry>& journal) {
    std::vector<child_record> out;
    for (auto& c : children_started(journal))
        out.push_back({std::move(c.id), c.on_close, c.joined});
    return out;
}

void engine_parts::note_outcomes(std::vector<child_record>& children,
                                 const std::vector<inbox_entry>& inbox) {
    for (auto& c : children)
        c.joined = c.joined || std::ranges::any_of(inbox, [&](const inbox_entry& e) {
                       return e.path == child_path(c.id);
                   });
}

namespace {

asio::awaitable<void> cancel_child(std::shared_ptr<engine::impl> self, std::string parent,
                                   std::string child) {
    // A child in the middle of a step on another worker refuses; its step ends in moments,
    // or its lease expires.
    auto deadline = std::chrono::steady_clock::now() + 2 * self->opt.lease_ttl;
    auto pause = std::chrono::milliseconds(50);
    for (;;) {
        std::optional<action_result> r;
        try {
            r = co_await self->cancel_anywhere(child);
        } catch (const std::exception& e) {
            self->log.warn("process {}: cancelling child {} failed: {}", parent, child, e.what());
        }
        if (r && *r) {
            self->log.info("process {}: cancelled, as its parent {} ended", child, parent);
            co_return;
        }
        if (r && (r->error().why == refusal::reason::final ||
                  r->error().why == refusal::reason::not_found))
            co_return;
        if (self->stopped || std::chrono::steady_clock::now() > deadline) {
            self->log.warn("process {}: ended, but its child {} could not be cancelled{}", parent,
                           child, r ? ": " + r->error().message : std::string());
            co_return;
        }
        asio::steady_timer wait(self->ex, pause);
        co_await wait.async_wait(asio::use_awaitable);
        pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::seconds(1));
    }
}

}  // namespace

namespace {

// What one instance's steps ask of the engine, for as long as the engine lives.
class calls_of_instance final : public detail::runtime::engine_calls {
  public:
    calls_of_instance(std::weak_ptr<engine::impl> engine, std::string instance)
        : engine_(std::move(engine)), instance_(std::move(instance)) {}

    asio::awaitable<void> start(std::string definition, std::string id, nlohmann::json params,
                                child_options options) override {
        auto from = options.detached ? std::string() : instance_;
        std::optional<trace::span_context> caller;  // the parent's, on this (its) part
        if (auto self = engine_.lock()) caller = self->current_span(instance_);
        return start_for(engine_, std::move(from), std::move(definition), std::move(id),
                         std::move(params), std::move(options), std::move(caller));
    }
    asio::awaitable<bool> deliver(std::string to, std::string path, nlohmann::json payload,
                                  std::string key) override {
        return deliver_for(engine_, std::move(to), std::move(path), std::move(payload),
                           std::move(key));
    }
    asio::awaitable<void> answer(std::string request, nlohmann::json answer) override {
        return answer_for(engine_, instance_, std::move(request), std::move(answer));
    }
    asio::awaitable<void> take_permit(limit l, std::uint64_t seq) override {
        return take_permit_for(engine_, instance_, std::move(l), seq);
    }
    asio::awaitable<void> give_permit(std::string l, std::uint64_t seq) override {
        return give_permit_for(engine_, instance_, std::move(l), seq);
    }
    bool may_restart() override {
        auto self = engine_.lock();
        if (!self) throw std::runtime_error("the engine stopped");
        const auto* old = self->worker_below(store_level_restart);
        if (old)
            self->log.info(
                "process {}: does not continue as new while worker {} (a Keel build before "
                "continuing as new) is alive",
                instance_, old->worker);
        return old == nullptr;
    }

  private:
    std::weak_ptr<engine::impl> engine_;
    std::string instance_;
};

}  // namespace

std::unique_ptr<detail::runtime::engine_calls> engine::impl::calls_for(std::string instance) {
    return std::make_unique<calls_of_instance>(weak_from_this(), std::move(instance));
}

asio::awaitable<void> engine::impl::tell_parent(std::string parent, std::string child,
                                                instance_status status,
                                                std::optional<nlohmann::json> result,
                                                std::optional<std::string> error) {
    auto path = child_path(child);
    auto outcome = child_outcome(status, result, error);
    auto d = co_await deliver_to(parent, std::move(path), std::move(outcome), child);
    if (d.result == delivery::outcome::no_instance)
        log.warn("process {}: its parent {} does not exist", child, parent);
}

asio::awaitable<bool> engine::impl::tell_parent_before_end(
    const std::shared_ptr<hot_instance>& in, instance_status status,
    const std::optional<nlohmann::json>& result, const std::optional<std::string>& error) {
    if (in->parent.empty()) co_return true;
    std::string failure;
    try {
        co_await tell_parent(in->parent, in->id, status, result, error);
        co_return true;
    } catch (const std::exception& e) {
        failure = e.what();
    }
    log.warn("process {}: could not tell its parent {} that it ended ({}); trying again", in->id,
             in->parent, failure);
    auto id = in->id;
    drop(in);
    schedule_wake(id, opt.lease_ttl / 10);
    co_return false;
}

asio::awaitable<std::vector<child_record>> engine::impl::children_of(
    const std::shared_ptr<hot_instance>& in) {
    auto exec = in->exec;  // the runtime stays alive while the journal loads
    auto& rt = exec->rt;
    std::vector<child_record> out = rt.children();
    if (rt.replaying()) {
        if (auto snap = co_await st.load(in->id, true))
            out = engine_parts::children_in(snap->journal);
    }
    engine_parts::note_outcomes(out, in->inbox);
    co_return out;
}

void engine::impl::close_children(std::string parent, std::vector<child_record> children) {
    for (auto& c : children)
        if (c.on_close == parent_close::cancel && !c.joined)
            asio::co_spawn(ex, cancel_child(shared_from_this(), parent, std::move(c.id)),
                           asio::detached);
}

}  // namespace keel::process
