// keel-orders: the orders service. Orders are paid, dispatched and delivered by a durable
// fulfilment process; users verify their e-mail through a durable verification process.
// Webhooks emit signals that resume the processes exactly once, however often they are
// retried. Everything durable lives in Redis.
//
//   keel-orders --redis redis://127.0.0.1:6390 --port 8080 --payment-timeout 3d
//
// Options (also KEEL_<NAME> environment variables and a JSON file through --config):
// --host, --port, --redis, --payment-timeout, --verification-timeout, --webhook-secret,
// --signal-route, the admin API's (--admin-token, --admin-host, --admin-port) and the
// runtime's own (--threads, --drain-timeout, --log-level, --log-format). --help lists them.

#include <boost/asio/post.hpp>
#include <iostream>
#include <keel/admin/admin.hpp>
#include <keel/di/container.hpp>
#include <keel/framework/redis/connection.hpp>
#include <keel/framework/service.hpp>
#include <keel/http/builtin.hpp>
#include <keel/http/health.hpp>
#include <keel/http/metrics.hpp>
#include <keel/http/middleware.hpp>
#include <keel/http/server.hpp>
#include <keel/http/signal_route.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/redis_store.hpp>

#include "controllers.hpp"
#include "processes.hpp"

namespace {

namespace http = keel::http;

keel::config::schema options() {
    keel::config::schema schema;
    keel::add_service_options(schema);
    keel::admin::add_options(schema);
    schema.add("host", keel::config::kind::string, std::string("0.0.0.0"),
               "address to listen on (0.0.0.0: every IPv4 interface; 127.0.0.1: this machine "
               "only; :: for IPv6)");
    schema.add({"port", keel::config::kind::integer, std::int64_t{8080}, "HTTP port", 0, 65535});
    schema.add("redis", keel::config::kind::string, std::string("redis://127.0.0.1:6379"),
               "Redis URL: redis://[user:pass@]host:port/db or unix:///path/to/redis.sock");
    schema.add({"payment_timeout", keel::config::kind::duration,
                keel::config::duration{std::chrono::hours(72)},
                "how long an order waits for its payment (2s, 5m, 3d, ...)", 0.001, 3.2e7});
    schema.add({"verification_timeout", keel::config::kind::duration,
                keel::config::duration{std::chrono::minutes(10)},
                "how long an e-mail verification waits for the right code", 0.001, 3.2e7});
    schema.add("webhook_secret", keel::config::kind::string, std::string(),
               "when set, every webhook must carry X-Signature: sha256=<hex HMAC-SHA256 of "
               "the body>");
    schema.add("signal_route", keel::config::kind::boolean, false,
               "serve POST /webhooks/signals/<signal path> to emit any signal by its path "
               "(for operators; covered by --webhook-secret)");
    return schema;
}

// Webhooks only: the rest of the API is for the shop's own front end. The check is attached
// to the routes under /webhooks, so no spelling of a webhook's path can skip it.
void require_signatures(http::router& router, const std::string& secret) {
    if (secret.empty()) return;
    router.group("/webhooks").use(http::webhook_signature({.secret = secret}));
}

int serve(const keel::config::values& values) {
    keel::service svc(keel::service_options_from(values));
    auto redis =
        keel::redis::connection::create(svc.executor(0), {.url = values.get_string("redis")});
    if (!redis) {
        std::cerr << "configuration error: redis: " << redis.error().message << "\n";
        return 2;
    }
    orders::settings config{values.get_duration("payment_timeout"),
                            values.get_duration("verification_timeout")};

    keel::process::redis_store store(*redis);
    keel::process::engine engine(svc.executor(0), store, svc.clock(),
                                 {.lease_ttl = std::chrono::seconds(10)});

    keel::di::registry registry;
    registry.instance(std::ref(*redis))
        .instance(std::ref(engine))
        .instance(std::ref(config))
        .singleton<orders::payment_signals>()
        .singleton<orders::shipping_signals>()
        .singleton<orders::verification_signals>()
        .singleton<orders::order_book>()
        .singleton<orders::user_book>()
        .singleton<orders::order_controller>()
        .singleton<orders::user_controller>()
        .singleton<orders::webhook_controller>();
    auto services = registry.build();
    engine.add(orders::order_fulfillment, services);
    engine.add(orders::email_verification, services);

    http::router router;
    http::metrics metrics;
    http::health health;
    health.add_check("redis", http::redis_check(*redis));
    metrics.add_source([&engine] { return engine.render_metrics(); });
    http::install_defaults(router, metrics, health);
    require_signatures(router, values.get_string("webhook_secret"));
    http::mount<orders::order_controller>(router, services);
    http::mount<orders::user_controller>(router, services);
    http::mount<orders::webhook_controller>(router, services);
    std::vector<const keel::signal_group*> groups{&services.get<orders::payment_signals>(),
                                                  &services.get<orders::shipping_signals>(),
                                                  &services.get<orders::verification_signals>()};
    if (values.get_bool("signal_route"))
        http::add_signal_route(router, groups, {.prefix = "/webhooks/signals"});

    auto admin = keel::admin::settings_from(values);
    http::router admin_router;
    http::router& admin_on = admin.port ? admin_router : router;
    if (admin.enabled())
        keel::admin::mount(admin_on, engine, store, {.token = admin.token, .groups = groups});

    http::server_options server_options;
    server_options.address = values.get_string("host");
    server_options.port = static_cast<std::uint16_t>(values.get_int("port"));
    server_options.metrics = &metrics;
    server_options.health = &health;
    http::server server(svc, router, server_options);
    server.start();
    std::optional<http::server> admin_server;
    if (admin.enabled() && admin.port) {
        http::server_options admin_options;
        admin_options.address = admin.host.empty() ? server_options.address : admin.host;
        admin_options.port = admin.port;
        admin_server.emplace(svc, admin_router, admin_options);
        admin_server->start();
        svc.logger().info("admin API listening on {}:{}", admin_options.address,
                          admin_server->port());
    }

    engine.run();
    svc.on_shutdown([&] { boost::asio::post(svc.executor(0), [&] { engine.stop(); }); });
    svc.logger().info("keel-orders listening on port {}", server.port());
    int code = svc.run();
    redis->close();
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    auto schema = options();
    auto values = keel::config::load(schema, argc, argv);
    if (!values) {
        std::cerr << values.error().what() << "\n";
        return 2;
    }
    if (values->help_requested()) {
        std::cout << schema.usage(argv[0]);
        return 0;
    }
    try {
        return serve(*values);
    } catch (const std::exception& e) {
        std::cerr << "keel-orders: " << e.what() << "\n";
        return 1;
    }
}
