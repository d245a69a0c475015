// keel-hello: the smallest Keel service. It counts its own starts in Redis, logs a heartbeat
// and shuts down gracefully on SIGTERM; the application root gives it /healthz, /readyz
// and /metrics on --port.
//
//   keel-hello --redis unix:///path/to/redis.sock --heartbeat 5s

#include <keel/app/application.hpp>

namespace hello {

namespace asio = boost::asio;

struct settings {
    keel::duration heartbeat = std::chrono::seconds(10);
};

void declare(keel::app::settings_schema<settings>& s) {
    s.add("heartbeat", &settings::heartbeat, "interval between heartbeats", {0.01, 86400});
}

// A component with a lifecycle: start() runs once everything it needs exists.
class heartbeat {
  public:
    using inject = keel::di::inject<keel::service&, keel::redis::connection&, settings&>;
    heartbeat(keel::service& svc, keel::redis::connection& redis, settings& s)
        : svc_(svc), redis_(redis), interval_(s.heartbeat) {}

    void start() {
        svc_.spawn(0, "heartbeat", [this] { return beat(); });
    }

  private:
    asio::awaitable<void> beat() {
        auto starts = co_await redis_.exec("INCR", "keel:hello:starts");
        if (starts)
            log_.info("started; this is start number {}", *starts->integer());
        else
            log_.warn("Redis is not answering yet: {}", starts.error().what());
        while (!svc_.stopping()) {
            co_await svc_.clock().sleep_for(interval_);
            auto pong = co_await redis_.ping();
            log_.info("heartbeat: redis {}", pong ? "ok" : pong.error().what());
        }
    }

    keel::service& svc_;
    keel::redis::connection& redis_;
    keel::duration interval_;
    keel::log::logger log_{"hello"};
};

}  // namespace hello

int main(int argc, char** argv) {
    return keel::app::application("keel-hello")
        .settings(hello::declare)
        .services([](keel::di::registry& r) { r.singleton<hello::heartbeat>(); })
        .run(argc, argv);
}
