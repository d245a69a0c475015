// keel::app::application::run(): builds the service from its recipe and runs it. The
// objects live in one struct, declared in the order they are needed; shutdown is explicit
// (on_drained hooks), not left to destruction order. Without Redis (without_redis()), the
// Redis parts are absent and the process store is in memory.

#include <algorithm>
#include <cctype>
#include <iostream>
#include <keel/admin/admin.hpp>
#include <keel/app/application.hpp>
#include <keel/framework/redis/connection.hpp>
#include <keel/framework/redis_documents.hpp>
#include <keel/framework/service.hpp>
#include <keel/http/builtin.hpp>
#include <keel/http/health.hpp>
#include <keel/http/metrics.hpp>
#include <keel/http/middleware.hpp>
#include <keel/http/otlp.hpp>
#include <keel/http/server.hpp>
#include <keel/http/signal_route.hpp>
#include <keel/process/memory_store.hpp>
#include <keel/process/redis_store.hpp>
#include <optional>

#include "allocator.hpp"

namespace keel::app {

namespace {

// The Redis connection's options (not declared for a service without Redis).
void add_redis_options(config::schema& schema) {
    schema.add("redis", config::kind::string, std::string("redis://127.0.0.1:6379"),
               "Redis URL: redis://[user:pass@]host:port/db, unix:///path/to/redis.sock, or "
               "redis-cluster://host:port,host:port for Redis Cluster (seed nodes)");
    schema.add({"redis_wait_replicas", config::kind::integer, std::int64_t{0},
                "durable writes (process transitions, entity saves) wait until this many "
                "replicas have them (WAIT), so a failover cannot lose what was acknowledged; "
                "0: do not wait (Redis replicates asynchronously)",
                0, 16});
    schema.add({"redis_shards", config::kind::integer, std::int64_t{0},
                "the process store's shard count, its unit of placement on a Redis Cluster (a "
                "store uses at most this many primaries); 0: the store's own, and for a new "
                "store 16 on a cluster, 1 on one server. Fixed once the store exists: a service "
                "configured with another count is refused every process call",
                0, static_cast<double>(process::max_shards)});
    schema.add({"redis_replica_timeout", config::kind::duration,
                config::duration{std::chrono::seconds(1)},
                "how long a durable write waits for its replicas before it is reported "
                "unavailable (the write stays on the primary; it is retried)",
                0.001, 60});
}

config::schema schema_of(const detail::recipe& r) {
    config::schema schema;
    add_service_options(schema);
    admin::add_options(schema);
    schema.add("host", config::kind::string, std::string("0.0.0.0"),
               "address to listen on (0.0.0.0: every IPv4 interface; 127.0.0.1: this machine "
               "only; :: for IPv6)");
    schema.add({"port", config::kind::integer, std::int64_t{8080}, "HTTP port", 0, 65535});
    http::add_server_limits(schema);
    http::add_server_tls_options(schema);
    http::add_otlp_options(schema);
    if (r.redis) add_redis_options(schema);
    schema.add({"lease_ttl", config::kind::duration, config::duration{std::chrono::seconds(10)},
                "how long a worker owns a process instance without renewing its lease (another "
                "worker takes over an instance this long after its worker died)",
                0.1, 3600});
    if (r.redis)
        schema.add("store_must_exist", config::kind::boolean, false,
                   "refuse a process store without its identity record instead of recording a "
                   "new one: a worker started against a Redis that lost its data starts nothing "
                   "until an operator confirms the store (keel store confirm)");
    schema.add("signal_route", config::kind::boolean, false,
               "serve POST " + r.signal_prefix +
                   "/<signal path> to emit any of the service's signals by its path");
    if (r.declare_settings) r.declare_settings(schema);
    return schema;
}

// A configuration error naming a setting as its source spelled it (--tls-cert,
// KEEL_TLS_CERT, tls_cert).
config::error setting_error(const config::values& values, const std::string& name,
                            std::string message) {
    auto source = values.source(name);
    std::string key = name;
    if (source == "flag") {
        std::replace(key.begin(), key.end(), '_', '-');
        key = "--" + key;
    } else if (source == "env") {
        std::transform(key.begin(), key.end(), key.begin(),
                       [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
        key = "KEEL_" + key;
    }
    return config::error{key, source, std::move(message)};
}

// The TLS files of a port load, or the error names the setting (`prefix`: "" for the
// service's port, "admin_" for the admin API's).
std::optional<config::error> check_tls(const config::values& values,
                                       const http::server_tls_options& tls,
                                       const std::string& prefix) {
    try {
        http::check_tls_files(tls);
        return std::nullopt;
    } catch (const http::tls_file_error& e) {
        static constexpr const char* names[] = {"tls_cert", "tls_key", "tls_client_ca"};
        auto name = prefix + names[static_cast<int>(e.which())];
        return setting_error(values, name, e.what());
    }
}

// Unusable TLS files are bad options, reported before anything starts; so is plain HTTP for a
// service that serves HTTPS only (application::require_tls).
std::optional<config::error> check_tls_settings(const config::values& values, bool required) {
    auto tls = http::read_server_tls(values);
    if (required && !tls.enabled())
        return setting_error(values, tls.certificate_file.empty() ? "tls_cert" : "tls_key",
                             "this service serves HTTPS only: give --tls-cert and --tls-key");
    if (auto e = check_tls(values, tls, "")) return e;
    auto admin = admin::settings_from(values);
    if (!admin.tls.enabled()) return std::nullopt;
    if (!admin.enabled() || admin.port == 0)
        return setting_error(
            values, admin.tls.certificate_file.empty() ? "admin_tls_key" : "admin_tls_cert",
            "applies to the admin API's own port: set --admin-token and "
            "--admin-port too (on the service's port, --tls-cert applies)");
    return check_tls(values, admin.tls, "admin_");
}

// An --otlp-endpoint that is not a collector's URL is a bad option, and so are an
// --otlp-protocol Keel does not speak and --otlp-headers it cannot send.
std::optional<config::error> check_otlp_settings(const config::values& values) {
    const auto& protocol = values.get_string("otlp_protocol");
    if (!http::parse_otlp_protocol(protocol))
        return setting_error(values, "otlp_protocol",
                             "'" + protocol + "' is not http/json or http/protobuf");
    try {
        static_cast<void>(http::parse_otlp_headers(values.get_string("otlp_headers")));
    } catch (const std::invalid_argument& e) {
        return setting_error(values, "otlp_headers", e.what());
    }
    try {
        static_cast<void>(http::read_otlp_options(values, {}));
        return std::nullopt;
    } catch (const std::invalid_argument& e) {
        return setting_error(values, "otlp_endpoint", e.what());
    }
}

bool is_loopback(const std::string& host) {
    return host == "127.0.0.1" || host == "::1" || host == "localhost";
}

// The running service, in the order its parts are made.
struct runtime {
    runtime(const detail::recipe& r, const config::values& values)
        : recipe(r),
          values(values),
          admin_settings(admin::settings_from(values)),
          svc(service_options_from(values)) {}

    // The service's threads, one io_context each.
    std::vector<asio::any_io_executor> threads() {
        std::vector<asio::any_io_executor> out;
        for (std::size_t i = 0; i < svc.thread_count(); ++i) out.push_back(svc.executor(i));
        return out;
    }

    // The connection comes up in the background: a Redis that is down at start is reported
    // on /readyz, not fatal. A URL that does not parse is a bad option.
    bool connect() {
        redis::connection_options options{.url = values.get_string("redis")};
        options.wait_replicas = static_cast<int>(values.get_int("redis_wait_replicas"));
        options.replica_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
            values.get_duration("redis_replica_timeout"));
        // A socket per service thread: requests and replies stay on the caller's thread.
        auto conn = redis::connection::create(threads(), std::move(options));
        if (!conn) {
            std::cerr << recipe.name << ": --redis: " << conn.error().message << "\n";
            return false;
        }
        redis.emplace(std::move(*conn));
        process::redis_store_options store_options;
        store_options.shards = static_cast<std::size_t>(values.get_int("redis_shards"));
        store.emplace(*redis, store_options);
        documents.emplace(*redis);
        return true;
    }

    // Without Redis: the process store in memory, and no connection nor documents.
    void keep_in_memory() { memory_store.emplace(); }

    process::store& process_store() {
        if (store) return *store;
        return *memory_store;
    }

    // With --otlp-endpoint: the exporter, the sink of every server and client made on the
    // service (set before the graph is built, so that the service's own clients have it).
    void start_tracing() {
        auto options = http::read_otlp_options(values, recipe.name);
        if (!options) return;
        std::string headers;  // their names: the values are credentials
        for (const auto& h : options->headers) headers += (headers.empty() ? "" : ", ") + h.name;
        log.info("exporting spans to {}/v1/traces as service.name {}, {}% of new traces{}{}",
                 options->endpoint, options->service_name, options->sample_ratio * 100,
                 headers.empty() ? "" : ", with header(s) ", headers);
        trace::set_root_sampling(options->sample_ratio);
        traces.emplace(svc, std::move(*options));
        svc.set_span_sink(&*traces);
    }

    void build_graph() {
        di::registry registry;
        auto& self = *this;
        registry.instance(std::ref(svc)).instance(std::ref(svc.clock()));
        if (redis)
            registry.instance(std::ref(*redis))
                .instance(std::ref(static_cast<keel::documents&>(*documents)));
        registry.instance(std::ref(process_store()))
            .singleton<process::engine>([&self](keel::service& s, process::store& st) {
                process::engine_options options;
                options.lease_ttl = self.values.get_duration("lease_ttl");
                options.store_must_exist = self.redis && self.values.get_bool("store_must_exist");
                options.spans = s.span_sink();
                // One part per service thread.
                return std::make_unique<process::engine>(self.threads(), st, s.clock(), options);
            });
        if (recipe.register_settings) recipe.register_settings(values, registry);
        for (const auto& add : recipe.registrations) add(registry);
        services = registry.build();
        engine = &services.get<process::engine>();
        for (const auto& group : recipe.groups) {
            auto& g = group(services);
            engine->attach(g);
            groups.push_back(&g);
        }
        for (const auto& add : recipe.definitions) add(*engine, services);
    }

    void build_routes() {
        if (redis) health.add_check("redis", http::redis_check(*redis));
        health.add_check("process store",
                         [e = engine]() -> asio::awaitable<expected<void, std::string>> {
                             if (!e->store_open())
                                 co_return unexpected(std::string("not open yet"));
                             if (auto why = e->store_in_question())
                                 co_return unexpected(std::move(*why));
                             co_return expected<void, std::string>();
                         });
        metrics.add_source([e = engine] { return e->render_metrics(); });
        if (redis) metrics.add_source(http::redis_metrics(*redis));
        if (traces)
            metrics.add_source([t = &*traces]() -> asio::awaitable<std::string> {
                co_return t->render_metrics();
            });
        http::install_defaults(router, metrics, health);
        for (const auto& add : recipe.routes) add(router, services);
        for (const auto& mount : recipe.mounts) mount(router, services);
        if (values.get_bool("signal_route"))
            http::add_signal_route(router, groups, {.prefix = recipe.signal_prefix});
        const auto& admin = admin_settings;
        // On a port of its own the admin API joins its callers' traces and logs its requests
        // as the service's port does (its metrics and probes stay on the service's port).
        if (admin.enabled() && admin.port)
            admin_router.use(http::trace_context()).use(http::request_id()).use(http::access_log());
        if (admin.enabled())
            admin::mount(admin.port ? admin_router : router, *engine, process_store(),
                         {.token = admin.token, .groups = groups});
    }

    void start_servers() {
        http::server_options options;
        options.address = values.get_string("host");
        options.port = static_cast<std::uint16_t>(values.get_int("port"));
        http::read_server_limits(values, options);
        options.tls = http::read_server_tls(values);
        options.metrics = &metrics;
        options.health = &health;
        server.emplace(svc, router, options);
        server->start();
        const auto& admin = admin_settings;
        if (admin.enabled() && admin.port) {
            http::server_options admin_options = options;
            admin_options.metrics = nullptr;
            admin_options.health = nullptr;
            admin_options.address = admin.host.empty() ? options.address : admin.host;
            admin_options.port = admin.port;
            admin_options.tls = admin.tls;
            if (options.tls.enabled() && !admin.tls.enabled() &&
                !is_loopback(admin_options.address))
                log.warn(
                    "the admin API's port {} speaks plain HTTP on {} while the service's "
                    "port uses TLS: its token crosses the network in clear (set "
                    "--admin-tls-cert, or --admin-host 127.0.0.1)",
                    admin.port, admin_options.address);
            admin_server.emplace(svc, admin_router, admin_options);
            admin_server->start();
            log.info("admin API listening on {}:{}", admin_options.address, admin_server->port());
        }
        log.info("{} listening on port {} (malloc: {})", recipe.name, server->port(),
                 detail::allocator_in_use());
    }

    // When shutdown begins, the worker stops announcing itself (others stop counting on the
    // versions it runs). After HTTP has drained: the engine, then the service's singletons,
    // then Redis.
    void shut_down_in_order() {
        svc.on_shutdown([this] {
            svc.spawn(0, "withdraw the process worker", [this]() -> asio::awaitable<void> {
                try {
                    co_await engine->withdraw();
                } catch (const std::exception& e) {  // its announcement expires by itself
                    log.warn("could not withdraw the process worker: {}", e.what());
                }
            });
        });
        // Each part of the engine stops on its own thread.
        for (std::size_t i = 0; i < svc.thread_count(); ++i)
            svc.on_drained(i, [this, i] {
                engine->stop();
                if (i == 0) log.info("process engine stopped");
            });
        svc.on_drained(0, [this] {
            try {
                services.stop();
            } catch (const std::exception& e) {  // each failure named; the others stopped
                log.error("{}", e.what());
            }
            if (!redis) {
                log.info("services stopped");
                return;
            }
            redis->close();
            log.info("services stopped, Redis closed");
        });
    }

    int run() {
        start_tracing();
        build_graph();
        build_routes();
        services.start();
        engine->run();
        start_servers();
        shut_down_in_order();
        return svc.run();
    }

    const detail::recipe& recipe;
    const config::values& values;
    admin::settings admin_settings;
    keel::service svc;
    std::optional<http::otlp_exporter> traces;
    std::optional<redis::connection> redis;
    std::optional<process::redis_store> store;
    std::optional<redis_documents> documents;
    std::optional<process::memory_store> memory_store;  // without Redis
    log::logger log{"app"};
    di::container services;
    process::engine* engine = nullptr;
    std::vector<const signals::signal_group*> groups;
    http::router router;
    http::router admin_router;
    http::metrics metrics;
    http::health health;
    std::optional<http::server> server;
    std::optional<http::server> admin_server;
};

}  // namespace

application::application(std::string name) : recipe_(std::make_unique<detail::recipe>()) {
    recipe_->name = std::move(name);
}
application::~application() = default;
application::application(application&&) noexcept = default;
application& application::operator=(application&&) noexcept = default;

application& application::services(std::function<void(di::registry&)> add) {
    recipe().registrations.push_back(std::move(add));
    return *this;
}

application& application::routes(std::function<void(http::router&, const di::container&)> add) {
    recipe().routes.push_back(std::move(add));
    return *this;
}

application& application::without_redis() {
    recipe().redis = false;
    return *this;
}

application& application::require_tls() {
    recipe().tls_required = true;
    return *this;
}

application& application::signal_route(std::string prefix) {
    recipe().signal_prefix = std::move(prefix);
    return *this;
}

int application::run(int argc, const char* const* argv) {
    const auto& r = recipe();
    auto schema = schema_of(r);
    auto values = config::load(schema, argc, argv);
    if (!values) {
        std::cerr << r.name << ": " << values.error().what() << "\n";
        return 2;
    }
    if (values->help_requested()) {
        std::cout << schema.usage(argc > 0 ? argv[0] : r.name);
        return 0;
    }
    if (auto refused = r.check_settings ? r.check_settings(*values) : std::nullopt) {
        std::cerr << r.name << ": " << setting_error(*values, refused->name, refused->reason).what()
                  << "\n";
        return 2;
    }
    if (auto bad = check_tls_settings(*values, r.tls_required)) {
        std::cerr << r.name << ": " << bad->what() << "\n";
        return 2;
    }
    if (auto bad = check_otlp_settings(*values)) {
        std::cerr << r.name << ": " << bad->what() << "\n";
        return 2;
    }
    try {
        runtime service(r, *values);
        if (!r.redis)
            service.keep_in_memory();
        else if (!service.connect())
            return 2;
        return service.run();
    } catch (const std::exception& e) {
        std::cerr << r.name << ": " << e.what() << "\n";
        return 1;
    }
}

}  // namespace keel::app
