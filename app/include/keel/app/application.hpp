#pragma once

/// @file
/// keel::app::application: a service's main in a few lines. Name the service, its settings,
/// its services, signals, processes and controllers, then run it:
///
/// @code
///   int main(int argc, char** argv) {
///       return keel::app::application("keel-orders")
///           .settings(orders::declare_settings)   // void(settings_schema<orders::settings>&)
///           .services(orders::add_services)        // void(keel::di::registry&)
///           .signals<orders::payment_signals, orders::shipping_signals>()
///           .processes(orders::order_fulfillment)
///           .controllers<orders::order_controller, orders::webhook_controller>()
///           .routes(orders::require_signatures)    // middleware, extra routes
///           .run(argc, argv);
///   }
/// @endcode
///
/// run() owns everything else, in this order: the options (the service's and the runtime's:
/// host, port, the HTTP server's limits and timeouts (http_max_connections, http_idle_timeout,
/// ...: keel::http::add_server_limits), the port's TLS files (tls_cert, tls_key,
/// tls_client_ca: keel::http::add_server_tls_options; checked before anything starts, and
/// reloaded on SIGHUP), otlp_endpoint and otlp_service_name (keel::http::add_otlp_options:
/// with an endpoint, an OTLP exporter is the span sink of the service's servers and of the
/// clients made on the service, its figures on /metrics), redis, redis_wait_replicas,
/// redis_replica_timeout, lease_ttl, store_must_exist, signal_route, the admin API's,
/// threads, drain_timeout, log_level, log_format; --help lists them), the Redis connection,
/// the process store and engine, the dependency graph, the router with its defaults,
/// metrics (with the engine's), health (with a Redis check and the process store's
/// identity, engine::store_in_question), the optional signal route and admin API, and the
/// servers.
///
/// The graph holds, besides the service's own registrations: keel::service,
/// keel::redis::connection, keel::documents (redis_documents on that connection, for the
/// service's repositories), keel::process::store, keel::process::engine, keel::clock and the
/// settings struct. Everything is checked before anything starts: a process handler's
/// dependency that is not registered fails like any missing dependency (keel::di::error,
/// naming keel::process::handler_dependencies<&handler>). Singletons with start()/stop() are
/// started, dependencies first, before the servers accept (see keel::di::container::start).
///
/// Shutdown (SIGTERM, SIGINT): the servers stop accepting and drain the requests in flight,
/// then the engine stops (instances stay durable in Redis), then the singletons stop in
/// reverse order, then Redis closes. Exit codes: 0 after a clean shutdown, 2 for bad
/// options (the message names the option), 1 for anything else that stops the start
/// (an unreachable Redis is not one: the service starts and reports it on /readyz).
///
/// A service that keeps no durable state (a test double such as examples/billing's
/// keel-payments-sim, a stateless gateway) calls without_redis(): it then has no Redis
/// options and no Redis connection, its processes run on a keel::process::memory_store
/// (gone when the process exits), and /readyz answers 200 with no Redis to wait for.

#include <functional>
#include <keel/app/detail/recipe.hpp>
#include <keel/app/settings.hpp>
#include <keel/framework/redis/connection.hpp>
#include <keel/framework/service.hpp>
#include <memory>
#include <string>

namespace keel::app {

/// A service's main: its name, settings, services, signals, processes and controllers; see the
/// file's description.
class application {
  public:
    /// The service called `name`, as its messages, its usage text and its spans' default
    /// service.name say.
    explicit application(std::string name);
    ~application();
    ///@{
    /// Moves the recipe.
    application(application&&) noexcept;
    application& operator=(application&&) noexcept;
    ///@}

    /// The service's own settings, bound to S and injectable as S&. Once. Their checks run
    /// before anything starts; a refused value is a bad option (exit 2, the option named).
    template <class S>
    application& settings(void (*declare)(settings_schema<S>&)) {
        auto schema = std::make_shared<settings_schema<S>>();
        declare(*schema);
        recipe().settings([schema](config::schema& s) { schema->declare(s); },
                          [schema](const config::values& v, di::registry& r) {
                              r.instance(std::make_shared<S>(schema->read(v)));
                          },
                          [schema](const config::values& v) { return schema->refused(v); });
        return *this;
    }

    /// Registers the service's own types (repositories, clients, ...). May be called more
    /// than once; each runs in order.
    application& services(std::function<void(di::registry&)> add);

    /// Signal groups: registered as singletons (unless already registered) and attached to
    /// the engine, so that controllers can emit them whether or not a process waits for
    /// them. They are also what the admin API and the signal route may emit.
    template <class... Groups>
    application& signals() {
        (recipe().signal_group<Groups>(), ...);
        return *this;
    }

    /// Process definitions. Their handlers' dependencies are checked when the graph is built.
    template <auto... Handlers>
    application& processes(const process::definition<Handlers>&... definitions) {
        (recipe().process(definitions), ...);
        return *this;
    }

    /// Controllers: registered as singletons (unless already registered) and mounted.
    template <class... Controllers>
    application& controllers() {
        (recipe().controller<Controllers>(), ...);
        return *this;
    }

    /// Runs after the router's defaults and before the controllers are mounted: middleware
    /// (router.group("/webhooks").use(...)) and routes of the service's own.
    application& routes(std::function<void(http::router&, const di::container&)> add);

    /// Serves `POST <prefix>/<signal path>` (emit any of the signals() by its path) when the
    /// service runs with --signal-route. Default prefix: /signals.
    application& signal_route(std::string prefix);

    /// Runs the service without Redis, for a service that keeps no durable state: no redis,
    /// redis_wait_replicas, redis_replica_timeout nor store_must_exist options (given, they
    /// are unknown options), no keel::redis::connection nor keel::documents in the graph (a
    /// service that injects one fails to start, naming it), no Redis check on /readyz nor
    /// Redis figures on /metrics. The process engine, its admin API and the signals still
    /// work, on a keel::process::memory_store: nothing of them survives the process.
    application& without_redis();

    /// Serves HTTPS only: without --tls-cert and --tls-key the service does not start (exit
    /// 2, naming the option), rather than answering plain HTTP on a port its clients trust.
    application& require_tls();

    /// Runs the service until it is told to stop; the process's exit code.
    int run(int argc, const char* const* argv);

  private:
    detail::recipe& recipe() { return *recipe_; }
    std::unique_ptr<detail::recipe> recipe_;
};

}  // namespace keel::app
