// keel-hello: the smallest Keel service. It reads its configuration, connects to Redis,
// counts its own starts there, logs a heartbeat, and shuts down gracefully on SIGTERM.
//
//   keel-hello --redis unix:///path/to/redis.sock --heartbeat 5s

#include <boost/asio/co_spawn.hpp>
#include <iostream>
#include <keel/framework/redis/connection.hpp>
#include <keel/framework/service.hpp>

namespace asio = boost::asio;

int main(int argc, char** argv) {
    keel::config::schema schema;
    keel::add_service_options(schema);
    schema.add("redis", keel::config::kind::string, std::string("redis://127.0.0.1:6379"),
               "Redis URL: redis://[user:pass@]host:port/db or unix:///path");
    schema.add({"heartbeat", keel::config::kind::duration,
                keel::config::duration{std::chrono::seconds(10)}, "interval between heartbeats",
                0.01, 86400});

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
        keel::service svc(keel::service_options_from(*values));
        auto redis =
            keel::redis::connection::create(svc.executor(0), {.url = values->get_string("redis")});
        if (!redis) {
            std::cerr << "configuration error: redis: " << redis.error().message << "\n";
            return 2;
        }
        auto heartbeat = values->get_duration("heartbeat");
        keel::log::logger log("hello");

        svc.spawn(0, "heartbeat", [&]() -> asio::awaitable<void> {
            auto starts = co_await redis->exec("INCR", "keel:hello:starts");
            if (starts)
                log.info("started; this is start number {}", *starts->integer());
            else
                log.warn("Redis is not answering yet: {}", starts.error().what());
            while (!svc.stopping()) {
                co_await svc.clock().sleep_for(heartbeat);
                auto pong = co_await redis->ping();
                log.info("heartbeat: redis {}", pong ? "ok" : pong.error().what());
            }
        });
        svc.on_shutdown([&] { log.info("shutting down"); });
        int code = svc.run();
        redis->close();
        return code;
    } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 2;
    }
}
