#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/process/forwarding_store.hpp>
#include <keel/process/memory_store.hpp>
#include <keel/process/simulation.hpp>
#include <map>
#include <set>

namespace keel::process {

namespace {

class worker_crashed : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct world;

// A worker's clock, `offset` off the world's: it reads the world's time plus the offset and
// its waits end when its own reading reaches their due time.
class skewed_clock final : public clock {
  public:
    skewed_clock(clock& world, duration offset) : world_(world), offset_(offset) {}

    time_point now() const override { return world_.now() + offset_; }

  protected:
    void do_wait_until(asio::any_io_executor ex, time_point when, wait_handler handler) override {
        world_.async_wait_until(ex, when - offset_, std::move(handler));
    }

  private:
    clock& world_;
    duration offset_;
};

// A worker's view of the shared store, through which faults are injected: a crashed worker
// can do nothing more, a paused one waits, a commit may crash the worker or lose its ack.
class faulty_store final : public forwarding_store {
  public:
    faulty_store(world& w, std::string worker);

    bool dead = false;
    bool paused = false;

    void unpause() {
        paused = false;
        for (auto* t : gate_) t->cancel();
    }
    const std::string& worker() const { return worker_; }

    asio::awaitable<expected<commit_result, store_error>> commit(commit_request req) override;
    asio::awaitable<void> put_answer(std::string id, std::string request, nlohmann::json answer,
                                     duration retention) override;
    using forwarding_store::acquire;
    asio::awaitable<expected<lease_grant, store_error>> acquire(std::string id, std::string worker,
                                                                time_point now, duration ttl,
                                                                version_refusals refused) override;
    asio::awaitable<expected<taken, store_error>> take(
        std::string id, std::string worker, time_point now, duration ttl, version_refusals refused,
        std::optional<std::uint64_t> known_length) override;
    // The calls that change a queue's counts: each is followed by a check of the limits.
    asio::awaitable<enqueued> enqueue(queue q, queue_entry entry, duration recheck) override;
    asio::awaitable<admission_round> admit(queue q, time_point now, std::size_t max,
                                           duration recheck, std::string worker) override;
    using forwarding_store::admit;
    asio::awaitable<void> leave_queue(std::string queue,
                                      std::vector<std::string> instances) override;
    using forwarding_store::leave_queue;

  private:
    // Another live, unstalled worker that holds the lease of `id` by its own clock.
    std::optional<std::string> live_holder(const std::string& id) const;
    // After this worker was granted an instance: counts a take-over from a live holder, and
    // resumes a stalled worker whose instance it was.
    void granted(const std::string& id, const std::optional<std::string>& live_holder);

    // Every call waits here while the worker is paused, and throws once it has crashed.
    asio::awaitable<void> before_call() override;

    world& world_;
    std::string worker_;
    std::vector<asio::steady_timer*> gate_;
};

// A store call run to its end on an io_context of its own (the memory store's calls complete
// without waiting for anything).
template <class T>
T now_of(asio::awaitable<T> call) {
    asio::io_context io;
    std::optional<T> out;
    asio::co_spawn(io, std::move(call), [&](std::exception_ptr e, T value) {
        if (e) std::rethrow_exception(e);
        out = std::move(value);
    });
    io.run();
    return std::move(*out);
}

struct world {
    world(const sim_scenario& s, const sim_faults& f, std::uint64_t seed, bool with_faults)
        : scenario(s),
          faults(f),
          schedule(seed),
          fault_rng(seed * 0x9e3779b97f4a7c15ULL + 1),
          faults_on(with_faults) {}

    struct worker {
        std::unique_ptr<skewed_clock> clock;
        std::unique_ptr<faulty_store> view;
        std::unique_ptr<engine> eng;
        bool replaced = false;
    };

    const sim_scenario& scenario;
    const sim_faults& faults;
    std::mt19937_64 schedule;
    std::mt19937_64 fault_rng;
    bool faults_on;

    asio::io_context io;
    manual_clock clock;
    memory_store store;
    std::vector<std::unique_ptr<worker>> workers;
    int next_worker = 1;
    std::size_t max_hot = 100;
    std::vector<std::string> trace;
    std::size_t fault_count = 0;
    std::optional<time_point> unpause_at;
    faulty_store* paused = nullptr;
    std::string paused_instance;
    std::size_t early_takeovers = 0;
    // What the queue checks found (check_queue_limits), at most one per queue.
    std::vector<std::string> queue_breaches;
    // Of queues with a worker_concurrency, each admitted instance's queue and the worker that
    // took it in (its enqueue admitted it, or a round did), until it leaves: as the store
    // counts a worker's share.
    std::map<std::string, std::pair<std::string, std::string>> taken_in;
    // Every answer stored for a request, by (instance, request id), in the order written.
    std::map<std::pair<std::string, std::string>, std::vector<nlohmann::json>> answers;

    bool roll(double p) {
        return faults_on && std::uniform_real_distribution<double>(0, 1)(fault_rng) < p;
    }
    std::string stamp() const {
        auto s = std::chrono::duration_cast<std::chrono::seconds>(clock.now() - start_time).count();
        return "t+" + std::to_string(s) + "s ";
    }
    void note(std::string what) { trace.push_back(stamp() + what); }

    void took_in(const queue& q, const std::string& instance, const std::string& worker) {
        if (q.worker_concurrency > 0)
            taken_in.insert_or_assign(instance, std::pair{q.name, worker});
    }

    // The scenario's queues within their limits, in all, per partition and per worker: a count
    // that went below zero shows as one far above them. After every call that changes the
    // counts.
    void check_queue_limits() {
        for (const auto& q : scenario.queues) {
            auto breach = "queue " + q.name + ": ";
            if (std::ranges::any_of(queue_breaches,
                                    [&](const auto& v) { return v.starts_with(breach); }))
                continue;
            auto state = now_of(store.describe_queue(q.name, 1000));
            if (q.concurrency > 0 && state.admitted > q.concurrency)
                queue_breaches.push_back(breach + std::to_string(state.admitted) +
                                         " admitted at once, limit " +
                                         std::to_string(q.concurrency) + " (" + stamp() + ")");
            for (const auto& p : state.partitions)
                if (q.partition_concurrency > 0 && p.admitted > q.partition_concurrency)
                    queue_breaches.push_back(
                        breach + "partition '" + p.name + "' has " + std::to_string(p.admitted) +
                        " admitted at once, limit " + std::to_string(q.partition_concurrency) +
                        " (" + stamp() + ")");
            if (q.worker_concurrency == 0) continue;
            std::map<std::string, std::uint32_t> per_worker;
            for (const auto& [instance, at] : taken_in)
                if (at.first == q.name) ++per_worker[at.second];
            for (const auto& [worker, n] : per_worker)
                if (n > q.worker_concurrency) {
                    queue_breaches.push_back(breach + "worker " + worker + " took in " +
                                             std::to_string(n) + " at once, limit " +
                                             std::to_string(q.worker_concurrency) + " (" + stamp() +
                                             ")");
                    break;
                }
        }
    }

    time_point start_time = clock.now();

    void add_worker() {
        auto w = std::make_unique<worker>();
        std::string name = "w" + std::to_string(next_worker++);
        w->view = std::make_unique<faulty_store>(*this, name);
        engine_options o;
        o.worker = name;
        o.max_hot = max_hot;
        o.lease_ttl = std::chrono::seconds(30);
        o.seed = fault_rng() | 1;
        // One code version for all: nothing to announce (and a heartbeat would keep virtual
        // time going after the scenario has settled).
        o.heartbeat = duration::zero();
        // Every other worker is an engine of two parts (as on a service with two threads),
        // here both on the one io_context: its instances are split between the parts by id.
        std::size_t part_count = next_worker % 2 == 0 ? 2 : 1;
        std::vector<asio::any_io_executor> parts(part_count,
                                                 asio::any_io_executor(io.get_executor()));
        const auto skew = faults_on ? draw_skew() : duration::zero();
        w->clock = std::make_unique<skewed_clock>(clock, skew);
        w->eng = std::make_unique<engine>(parts, *w->view, *w->clock, o);
        scenario.define(*w->eng);
        for (const auto& q : scenario.queues) w->eng->add_queue(q);
        w->eng->run();
        workers.push_back(std::move(w));
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(skew).count();
        note("worker " + name + " up" +
             (ms != 0 ? ", clock skew " + std::to_string(ms) + " ms" : ""));
    }

    worker* find(const std::string& name) {
        for (auto& w : workers)
            if (w->view->worker() == name) return w.get();
        return nullptr;
    }

    std::vector<worker*> live() {
        std::vector<worker*> out;
        for (auto& w : workers)
            if (!w->view->dead) out.push_back(w.get());
        return out;
    }

    duration draw_skew() {
        auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(faults.max_clock_skew);
        if (bound.count() <= 0) return duration::zero();
        return std::chrono::milliseconds(
            std::uniform_int_distribution<std::int64_t>(-bound.count(), bound.count())(fault_rng));
    }

    worker& pick(std::vector<worker*> among) { return *among[fault_rng() % among.size()]; }

    void crash(faulty_store& view, const std::string& why) {
        if (view.dead) return;
        view.dead = true;
        ++fault_count;
        note("crash " + view.worker() + " " + why);
        if (paused == &view) {
            paused = nullptr;
            unpause_at.reset();
        }
        view.unpause();
    }

    void replace_dead() {
        for (std::size_t i = 0; i < workers.size(); ++i) {
            auto& w = workers[i];
            if (!w->view->dead || w->replaced) continue;
            w->replaced = true;
            w->eng->stop();
            add_worker();
        }
    }

    void poke_all() {
        for (auto* w : live()) w->eng->poke();
    }
};

faulty_store::faulty_store(world& w, std::string worker)
    : forwarding_store(w.store), world_(w), worker_(std::move(worker)) {}

asio::awaitable<void> faulty_store::before_call() {
    while (paused && !dead) {
        asio::steady_timer t(world_.io, asio::steady_timer::time_point::max());
        gate_.push_back(&t);
        error_code ec;
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        std::erase(gate_, &t);
    }
    if (dead) throw worker_crashed(worker_ + " crashed");
}

// A reply is a step: a worker that dies after storing the answer and before committing the
// step stores it again when the step runs again, which must store the same answer.
asio::awaitable<void> faulty_store::put_answer(std::string id, std::string request,
                                               nlohmann::json answer, duration retention) {
    co_await before_call();
    world_.answers[{id, request}].push_back(answer);
    co_await world_.store.put_answer(id, request, std::move(answer), retention);
    if (world_.roll(world_.faults.crash_at_commit / 2)) {
        world_.crash(*this, "after answering " + request + " of " + id);
        throw worker_crashed(worker_ + " crashed");
    }
}

asio::awaitable<expected<commit_result, store_error>> faulty_store::commit(commit_request req) {
    co_await before_call();
    if (!world_.paused && world_.live().size() > 1 && world_.roll(world_.faults.lease_pause)) {
        // Stalls with the write in hand until the lease has expired and another worker took
        // the instance over: the write must then be fenced.
        paused = true;
        world_.paused = this;
        world_.unpause_at = world_.clock.now() + std::chrono::seconds(45);
        world_.paused_instance = req.instance;
        ++world_.fault_count;
        world_.note("pause " + worker_ + " before a commit to " + req.instance);
        co_await before_call();
    }
    if (world_.roll(world_.faults.crash_at_commit / 2)) {
        world_.crash(*this, "before a commit to " + req.instance);
        throw worker_crashed(worker_ + " crashed");
    }
    auto before = world_.faults_on ? world_.store.save(req.instance) : nullptr;
    auto r = world_.store.commit_now(req);
    if (world_.roll(world_.faults.crash_at_commit / 2)) {
        world_.crash(*this, "after a commit to " + req.instance);
        throw worker_crashed(worker_ + " crashed");
    }
    if (r && before && world_.roll(world_.faults.lost_commit)) {
        // Acknowledged, then a failover: the replica that takes over never had the write.
        world_.store.restore(*before);
        ++world_.fault_count;
        world_.note("failover loses the commit of " + worker_ + " to " + req.instance);
    }
    if (!r) world_.note("commit of " + worker_ + " rejected: " + std::string(to_string(r.error())));
    if (r && world_.roll(world_.faults.lost_ack)) {
        ++world_.fault_count;
        world_.note("lost ack " + worker_ + " " + req.instance);
        throw std::runtime_error("commit acknowledgement lost");
    }
    co_return r;
}
asio::awaitable<expected<lease_grant, store_error>> faulty_store::acquire(
    std::string id, std::string worker, time_point now, duration ttl, version_refusals refused) {
    co_await before_call();
    auto holder = live_holder(id);
    auto grant = world_.store.acquire_now(id, worker, now, ttl, refused);
    if (grant) granted(id, holder);
    co_return grant;
}

asio::awaitable<expected<store::taken, store_error>> faulty_store::take(
    std::string id, std::string worker, time_point now, duration ttl, version_refusals refused,
    std::optional<std::uint64_t> known_length) {
    co_await before_call();
    auto holder = live_holder(id);
    auto got = world_.store.take_now(id, worker, now, ttl, refused, known_length);
    if (got) granted(id, holder);
    co_return got;
}

asio::awaitable<enqueued> faulty_store::enqueue(queue q, queue_entry entry, duration recheck) {
    auto worker = entry.worker;
    auto r = co_await forwarding_store::enqueue(q, std::move(entry), recheck);
    if (r.admitted) world_.took_in(q, r.instance, worker);
    world_.check_queue_limits();
    co_return r;
}

asio::awaitable<admission_round> faulty_store::admit(queue q, time_point now, std::size_t max,
                                                     duration recheck, std::string worker) {
    auto r = co_await forwarding_store::admit(q, now, max, recheck, worker);
    for (const auto& a : r.admitted)
        if (a.fresh) world_.took_in(q, a.instance, worker);
    world_.check_queue_limits();
    co_return r;
}

asio::awaitable<void> faulty_store::leave_queue(std::string queue,
                                                std::vector<std::string> instances) {
    co_await forwarding_store::leave_queue(std::move(queue), instances);
    for (const auto& id : instances) world_.taken_in.erase(id);
    world_.check_queue_limits();
}

std::optional<std::string> faulty_store::live_holder(const std::string& id) const {
    auto snap = world_.store.load_now(id, false);
    if (!snap || !snap->lease || snap->lease->worker == worker_) return std::nullopt;
    auto* holder = world_.find(snap->lease->worker);
    if (!holder || holder->view->dead || holder->view->paused) return std::nullopt;
    if (holder->clock->now() >= snap->lease_expires) return std::nullopt;
    return snap->lease->worker;
}

void faulty_store::granted(const std::string& id, const std::optional<std::string>& holder) {
    if (holder) {
        ++world_.early_takeovers;
        world_.note(worker_ + " took over " + id + " while " + *holder +
                    "'s clock said its lease ran");
    }
    if (world_.paused && world_.paused != this && world_.paused_instance == id) {
        // Resume the stalled worker while the new owner holds the instance.
        world_.note(worker_ + " took over " + id);
        world_.unpause_at = world_.clock.now();
    }
}

// The shape of a journal that must not depend on faults: kinds, names and the values that
// come from deterministic code or from signals (not timer due times).
// Whether a queued instance waited for its admission depends on timing (a crashed worker's
// instance holds its slot until it is taken over), so of its queue the shape keeps only the
// queue's name: the marker without the admitted-at-enqueue flag, and not the admission.
nlohmann::json shape(const std::vector<journal_entry>& journal) {
    nlohmann::json out = nlohmann::json::array();
    auto queue = queue_of(journal);
    for (const auto& e : journal) {
        if (queue && e.kind == op_kind::patch && out.empty()) {
            out.push_back({"queue", *queue});
            continue;
        }
        if (queue && e.kind == op_kind::signal && e.name == admission_path) continue;
        nlohmann::json item = {std::string(to_string(e.kind)), e.name};
        if (e.kind == op_kind::run || e.kind == op_kind::race || e.kind == op_kind::any)
            item.push_back(e.value);
        if (e.kind == op_kind::signal) item.push_back(e.value.value("payload", nlohmann::json()));
        out.push_back(std::move(item));
    }
    return out;
}

}  // namespace

simulation::simulation(sim_scenario scenario, sim_faults faults)
    : scenario_(std::move(scenario)), faults_(faults) {}

namespace {

// Every planned instance made, and every instance of the store final or parked.
bool all_done(world& w, const sim_plan& plan) {
    for (const auto& s : plan.starts)
        if (!w.store.load_now(s.id, false)) return false;
    for (const auto& [definition, counts] : w.store.counts_now())
        if (counts[static_cast<std::size_t>(index_status::running)] > 0 ||
            counts[static_cast<std::size_t>(index_status::suspended)] > 0 ||
            counts[static_cast<std::size_t>(index_status::queued)] > 0)
            return false;
    return true;
}

}  // namespace

sim_outcome simulation::run(std::uint64_t seed, bool with_faults) const {
    world w(scenario_, faults_, seed, with_faults);
    sim_outcome out;
    auto plan = scenario_.plan(w.schedule);
    w.max_hot = w.schedule() % 2 ? 100 : 0;  // hot instances or replay after every suspension
    auto by_time = [](const auto& a, const auto& b) { return a.at < b.at; };
    std::stable_sort(plan.starts.begin(), plan.starts.end(), by_time);
    std::stable_sort(plan.signals.begin(), plan.signals.end(), by_time);
    const auto t0 = w.clock.now();
    w.add_worker();
    w.add_worker();

    std::size_t next_start = 0;
    std::size_t next_signal = 0;
    std::vector<std::pair<std::size_t, faulty_store*>> started_by;
    constexpr std::size_t max_steps = 200'000;
    std::size_t step = 0;
    for (; step < max_steps; ++step) {
        w.replace_dead();
        auto now = w.clock.now();
        while (next_start < plan.starts.size() && t0 + plan.starts[next_start].at <= now)
            started_by.emplace_back(next_start++, nullptr);
        // A client retries a start (idempotent) until the instance exists: the worker it asked
        // may have crashed before the start reached the store.
        for (auto& [index, by] : started_by) {
            const auto& s = plan.starts[index];
            if (by && !by->dead) continue;
            if (by && w.store.load_now(s.id, false)) continue;
            auto& worker = w.pick(w.live());
            by = worker.view.get();
            w.note((s.queue.empty() ? "start " : "enqueue ") + s.id + " on " +
                   worker.view->worker());
            if (s.queue.empty()) {
                asio::co_spawn(w.io, worker.eng->start_instance(s.definition, s.id, s.params),
                               [](std::exception_ptr) {});
            } else {
                enqueue_options as{.partition = s.partition};
                asio::co_spawn(
                    w.io, worker.eng->enqueue_instance(s.queue, as, s.definition, s.id, s.params),
                    [](std::exception_ptr, std::string) {});
            }
        }
        while (next_signal < plan.signals.size() && t0 + plan.signals[next_signal].at <= now) {
            const auto& s = plan.signals[next_signal++];
            inbox_entry e{0, s.key, s.path, s.payload, t0 + s.at};
            auto d = w.store.deliver_now(s.instance, e);
            w.note("signal " + s.path + " -> " + std::to_string(static_cast<int>(d.result)));
            if (w.roll(faults_.duplicate)) {
                ++w.fault_count;
                w.store.deliver_now(s.instance, e);
                w.note("duplicate " + s.path);
            }
            w.poke_all();
        }
        if (w.paused && w.unpause_at && now >= *w.unpause_at) {
            w.note("resume " + w.paused->worker());
            w.paused->unpause();
            w.paused = nullptr;
            w.unpause_at.reset();
        }
        if (w.faults_on) {
            std::vector<world::worker*> busy;
            for (auto* x : w.live())
                if (x->eng->hot_count() > 0) busy.push_back(x);
            if (!busy.empty() && w.roll(faults_.crash_in_flight)) {
                w.crash(*w.pick(busy).view, "mid-step");
                continue;
            }
        }
        if (w.io.stopped()) w.io.restart();
        if (w.io.poll_one() > 0) continue;
        if (!scenario_.queues.empty() && next_start == plan.starts.size() &&
            next_signal == plan.signals.size() && all_done(w, plan))
            break;
        // Idle: move time to the next thing that will happen.
        std::optional<time_point> next = w.clock.next_deadline();
        auto consider = [&](time_point t) {
            if (!next || t < *next) next = t;
        };
        if (next_start < plan.starts.size()) consider(t0 + plan.starts[next_start].at);
        if (next_signal < plan.signals.size()) consider(t0 + plan.signals[next_signal].at);
        if (w.unpause_at) consider(*w.unpause_at);
        if (!next) break;
        w.clock.advance_to(std::max(*next, now));
    }
    out.steps = step;
    out.faults = w.fault_count;
    out.early_takeovers = w.early_takeovers;
    if (step == max_steps) out.violations.push_back("the run did not settle");
    out.violations.insert(out.violations.end(), w.queue_breaches.begin(), w.queue_breaches.end());

    // The end state.
    out.instances = nlohmann::json::object();
    std::map<std::string, std::vector<std::string>> consumed_keys;
    std::set<std::pair<std::string, std::uint64_t>> consumed_ids;
    for (const auto& c : w.store.consumed()) {
        consumed_keys[c.instance].push_back(c.key);
        if (!consumed_ids.insert({c.instance, c.inbox_id}).second)
            out.violations.push_back("signal " + c.key + " consumed twice by " + c.instance);
    }
    // Every instance, those the plan started and those they started (children).
    std::set<std::string> ids;
    std::size_t listed = 0;
    list_query all;
    all.limit = 7;
    for (;;) {
        auto page = w.store.list_now(all);
        listed += page.instances.size();
        for (const auto& i : page.instances) ids.insert(i.id);
        if (page.next.empty()) break;
        all.cursor = page.next;
    }
    for (const auto& s : plan.starts)
        if (!ids.contains(s.id))
            out.violations.push_back("instance " + s.id + " was never created");
    for (const auto& id : ids) {
        auto snap = w.store.load_now(id, true);
        if (!snap) continue;
        const auto& s = *snap;
        std::set<std::uint64_t> seqs;
        for (const auto& e : snap->journal)
            if (!seqs.insert(e.seq).second)
                out.violations.push_back(s.id + ": operation #" + std::to_string(e.seq) +
                                         " recorded twice");
        std::vector<std::string> left;
        for (const auto& e : snap->inbox) left.push_back(e.key);
        auto keys = consumed_keys[s.id];
        std::erase_if(keys, [](const std::string& k) { return k.ends_with(admission_path); });
        out.instances[s.id] = {{"status", std::string(to_string(snap->status))},
                               {"result", snap->result.value_or(nullptr)},
                               {"error", snap->error.value_or("")},
                               {"journal", shape(snap->journal)},
                               {"consumed", keys},
                               {"unconsumed", left}};
    }
    // Each request of the plan has at most one answer, stored again only unchanged: the
    // stored one is part of the outcome, so it must also be the one of the run without faults.
    for (const auto& s : plan.signals) {
        if (!s.key.starts_with("request:")) continue;
        auto request = s.key.substr(std::string_view("request:").size());
        auto written = w.answers.find({s.instance, request});
        if (written == w.answers.end()) continue;
        for (const auto& a : written->second)
            if (a != written->second.front())
                out.violations.push_back(s.instance + ": request " + request + " answered " +
                                         written->second.front().dump() + ", then " + a.dump());
        if (out.instances.contains(s.instance))
            out.instances[s.instance]["answers"][request] = written->second.back();
    }
    // The index's counts agree with the instances themselves, and listing finds each once.
    instance_counts scanned;
    for (const auto& id : ids) {
        if (auto snap = w.store.load_now(id, false))
            ++scanned[snap->definition]
                     [static_cast<std::size_t>(index_status_of(snap->status, snap->parked))];
    }
    if (w.store.counts_now() != scanned)
        out.violations.push_back("the index's counts differ from a scan of the instances");
    if (listed != w.store.size())
        out.violations.push_back("listing found " + std::to_string(listed) + " of " +
                                 std::to_string(w.store.size()) + " instances");
    // At most one worker writes per instance and epoch, and only the lease holder.
    std::map<std::pair<std::string, std::uint64_t>, std::string> writers;
    for (const auto& c : w.store.commits()) {
        auto [it, fresh] = writers.try_emplace({c.instance, c.epoch}, c.lease.worker);
        if (!fresh && it->second != c.lease.worker)
            out.violations.push_back(c.instance + ": workers " + it->second + " and " +
                                     c.lease.worker + " both committed in epoch " +
                                     std::to_string(c.epoch));
        if (c.lease.worker != c.holder || c.lease.epoch != c.epoch)
            out.violations.push_back(c.instance + ": " + c.lease.worker + " committed with epoch " +
                                     std::to_string(c.lease.epoch) + " while " +
                                     (c.holder.empty() ? std::string("nobody") : c.holder) +
                                     " held epoch " + std::to_string(c.epoch));
    }
    out.trace = std::move(w.trace);
    for (auto& x : w.workers) x->eng->stop();
    return out;
}

std::vector<std::string> simulation::check(std::uint64_t seed, sim_outcome* faulty_out) const {
    auto clean = run(seed, false);
    auto faulty = run(seed, true);
    std::vector<std::string> violations;
    for (auto& v : clean.violations) violations.push_back("without faults: " + v);
    for (auto& v : faulty.violations) violations.push_back("with faults: " + v);
    if (clean.instances != faulty.instances)
        violations.push_back("the outcome differs with faults (" + std::to_string(faulty.faults) +
                             " injected)\n  without: " + clean.instances.dump() +
                             "\n  with:    " + faulty.instances.dump());
    if (!violations.empty()) {
        std::string trace = "trace with faults:";
        for (auto& t : faulty.trace) trace += "\n    " + t;
        violations.push_back(trace);
    }
    if (faulty_out) *faulty_out = std::move(faulty);
    return violations;
}

}  // namespace keel::process
