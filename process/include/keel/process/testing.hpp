#pragma once

/// @file
/// keel::process::testing: a service's processes in a unit test, in virtual time, with no
/// Redis and no threads. The environment holds an in-memory store, a manual clock and an
/// engine on one io_context that it drives until nothing is ready; the service's own
/// registrations go into its DI registry, and replace<T>() swaps one for a fake. The graph's
/// keel::documents are in memory (keel::memory_documents, lock waits in virtual time), so
/// repositories built on them need no Redis either:
///
/// @code
///   keel::process::testing::environment env(orders::add_services);
///   env.replace<orders::order_book>(std::ref(fake_orders))
///       .services([](keel::di::registry& r) { r.instance(std::make_shared<orders::settings>()); })
///       .signals<orders::payment_signals, orders::shipping_signals>()
///       .processes(orders::order_fulfillment);
///   auto order = env.start(orders::order_fulfillment, keel::ref<orders::order>("o-1"));
///   env.emit(env.get<orders::payment_signals>().received, keel::ref<orders::order>("o-1"),
///            orders::payment{"tx-1", 42.5});
///   env.advance(std::chrono::days(3));        // timers due by then fire, in order
///   EXPECT_EQ(env.status(order), keel::process::instance_status::suspended);
///   EXPECT_EQ(env.result(order), std::nullopt);
///   env.journal(order)                        // what the instance did, entry by entry
/// @endcode
///
/// The graph is built at the first start(), emit(), get() or advance(): registrations and
/// replacements come before. Every call returns once the engine has nothing left to do at
/// the current virtual instant. A handler dependency that is not registered fails the build
/// with keel::di::error, as in the service. Not thread-safe; one environment per test.

#include <functional>
#include <keel/di/container.hpp>
#include <keel/framework/clock.hpp>
#include <keel/framework/memory_documents.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/dependencies.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/memory_store.hpp>
#include <keel/process/testing/loop.hpp>
#include <keel/process/testing/replay.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace keel::process::testing {

/// A service's processes in a unit test, in virtual time (see the file's description).
class environment {
  public:
    /// An environment whose DI registry holds the engine, its store (process::store), its
    /// clock (keel::clock), in-memory keel::documents, and what `add_services` registers.
    /// `options`: the engine's; by default worker "test" with seed 1, so ids and jitter are
    /// the same in every run.
    explicit environment(std::function<void(di::registry&)> add_services = {},
                         engine_options options = test_options())
        : engine_(loop_.executor(), store_, clock_, std::move(options)) {
        registry_.instance(std::ref(engine_))
            .instance(std::ref(static_cast<process::store&>(store_)))
            .instance(std::ref(static_cast<keel::clock&>(clock_)))
            .instance(std::ref(static_cast<keel::documents&>(documents_)));
        if (add_services) add_services(registry_);
    }
    ~environment() {
        engine_.stop();
        settle();
    }
    environment(const environment&) = delete;
    environment& operator=(const environment&) = delete;

    /// More registrations (before the graph is built).
    environment& services(const std::function<void(di::registry&)>& add) {
        add(before_build());
        return *this;
    }
    /// Swaps a registered T for a fake: an object (std::ref, std::shared_ptr) or a factory.
    template <class T, class Fake>
    environment& replace(Fake fake) {
        before_build().template replace<T>(std::move(fake));
        return *this;
    }
    /// Signal groups, registered (unless they are) and attached to the engine.
    template <class... Groups>
    environment& signals() {
        (add_group<Groups>(), ...);
        return *this;
    }
    /// Process definitions, registered with the engine; their handlers' dependencies are
    /// checked when the graph is built (handler_dependencies).
    template <auto... Handlers>
    environment& processes(const definition<Handlers>&... definitions) {
        (add_definition(definitions), ...);
        return *this;
    }

    /// The graph's T (builds it).
    template <class T>
    T& get() {
        return built().template get<T>();
    }

    /// Starts an instance (idempotent) and runs it until it waits or ends.
    template <auto H, class... P>
    handle<typename definition<H>::result_type> start(const definition<H>& def, P... params) {
        built();
        return run(engine_.start(def, std::move(params)...));
    }
    /// Emits a signal (any signal::emit arguments) and runs what it wakes.
    template <class Signal, class... A>
    signals::emit_result emit(const Signal& signal, A&&... args) {
        built();
        return run(signal.emit(std::forward<A>(args)...));
    }
    /// Moves virtual time forward; timers due by then fire in order, each at its own time:
    /// the clock stops at every instant an instance is due (a timer, a deadline) and the
    /// engine runs what is due before time moves on, so ctx.now() after a timer reads the
    /// timer's time, not the end of the advance.
    void advance(duration d) {
        built();
        auto end = clock_.now() + d;
        settle();
        while (auto due = store_.next_due_now()) {
            if (*due > end || *due <= clock_.now()) break;
            clock_.advance_to(*due);
            settle();
        }
        clock_.advance_to(end);
        settle();
    }
    /// The current virtual time.
    time_point now() const { return clock_.now(); }

    ///@{
    /// An instance's status; std::invalid_argument when there is no such instance.
    instance_status status(const std::string& id) { return describe(id).status; }
    template <class R>
    instance_status status(const handle<R>& h) {
        return status(h.id());
    }
    ///@}
    /// The result of a completed instance, nullopt otherwise.
    template <class R>
    std::optional<R> result(const handle<R>& h) {
        auto info = describe(h.id());
        if (info.status != instance_status::completed || !info.result) return std::nullopt;
        return info.result->template get<R>();
    }
    /// Why an instance failed, or nullopt.
    std::optional<std::string> error(const std::string& id) { return describe(id).error; }
    ///@{
    /// What an instance did, entry by entry; std::invalid_argument when there is no such
    /// instance.
    std::vector<journal_entry> journal(const std::string& id) { return snapshot(id).journal; }
    template <class R>
    std::vector<journal_entry> journal(const handle<R>& h) {
        return journal(h.id());
    }
    ///@}
    /// Everything the store knows about an instance; std::invalid_argument when there is
    /// none.
    instance_snapshot snapshot(const std::string& id) {
        auto snap = loop_.run(store_.load(id, true));
        if (!snap) throw std::invalid_argument("no process instance " + id);
        return std::move(*snap);
    }

    /// The engine (worker "test").
    process::engine& engine() { return engine_; }
    /// The in-memory store the engine runs on.
    memory_store& store() { return store_; }
    /// The virtual clock; advance() moves it (moving it directly fires nothing until the next
    /// settle()).
    manual_clock& clock() { return clock_; }
    /// The graph's keel::documents, in memory.
    memory_documents& documents() { return documents_; }

    /// Runs a coroutine to completion at the current instant (see testing::loop::run).
    template <class T>
    T run(asio::awaitable<T> task) {
        return loop_.run(std::move(task));
    }
    /// Runs every ready handler until nothing is left to do at this instant.
    void settle() { loop_.settle(); }

  private:
    static engine_options test_options() {
        engine_options o;
        o.worker = "test";
        o.seed = 1;
        return o;
    }
    instance_info describe(const std::string& id) {
        built();
        auto info = run(engine_.describe(id));
        if (!info) throw std::invalid_argument("no process instance " + id);
        return std::move(*info);
    }
    di::registry& before_build() {
        if (services_)
            throw std::logic_error(
                "keel::process::testing: register and replace before the first start, emit, "
                "get or advance");
        return registry_;
    }
    template <class G>
    void add_group() {
        auto& r = before_build();
        if (!r.template contains<G>()) r.template singleton<G>();
        attach_.push_back(
            [](const di::container& c, process::engine& e) { e.attach(c.template get<G>()); });
    }
    template <auto H>
    void add_definition(const definition<H>& def) {
        auto& r = before_build();
        if (!r.template contains<handler_dependencies<H>>())
            r.template singleton<handler_dependencies<H>>();
        attach_.push_back([def](const di::container& c, process::engine& e) { e.add(def, c); });
    }
    const di::container& built() {
        if (!services_) {
            services_ = registry_.build();
            for (const auto& attach : attach_) attach(*services_, engine_);
            engine_.run();
            settle();
        }
        return *services_;
    }

    loop loop_;
    manual_clock clock_;
    memory_store store_;
    memory_documents documents_{clock_};
    di::registry registry_;
    std::vector<std::function<void(const di::container&, process::engine&)>> attach_;
    std::optional<di::container> services_;  // declared before the engine, which uses it
    process::engine engine_;
};

}  // namespace keel::process::testing
