// keel-app-memory-probe: a service on keel::app::application with without_redis(), for
// tests/app/without_redis_test.cpp: a process run by the engine on the in-memory store, and
// a lifecycle singleton. Built twice: KEEL_APP_MEMORY_PROBE_NEEDS_REDIS adds a singleton
// that injects keel::redis::connection, which such a service's graph does not have.

#include <keel/app/application.hpp>
#include <keel/process/context.hpp>

namespace memory_probe {

namespace asio = boost::asio;
using keel::http::request;
using keel::http::response;

struct counter {
    int next() { return ++value; }
    int value = 0;
};

keel::process::durable<int> count(keel::process::context& ctx, std::string, counter& c) {
    co_return co_await ctx.run("count", [&]() -> asio::awaitable<int> { co_return c.next(); });
}
inline const auto counting = keel::process::define<count>("/count/:name");

// Logs its lifecycle; the shutdown test reads it from the log.
struct lifecycle_probe {
    void start() { log.info("probe started"); }
    void stop() { log.info("probe stopped"); }
    keel::log::logger log{"probe"};
};

#ifdef KEEL_APP_MEMORY_PROBE_NEEDS_REDIS
struct redis_user {
    using inject = keel::di::inject<keel::redis::connection&>;
    explicit redis_user(keel::redis::connection&) {}
};
#endif

class count_controller {
  public:
    using inject = keel::di::inject<keel::process::engine&, lifecycle_probe&>;
    count_controller(keel::process::engine& e, lifecycle_probe&) : engine_(e) {}

    static void routes(keel::http::controller_routes<count_controller>& r) {
        r.post("/count/:name", &count_controller::start_count);
    }

    asio::awaitable<response> start_count(request& req) {
        auto handle = co_await engine_.start(counting, std::string(req.param("name")));
        auto result = co_await handle.wait();
        co_return response::json({{"count", result ? *result : -1}});
    }

  private:
    keel::process::engine& engine_;
};

void add_services(keel::di::registry& r) {
    r.singleton<counter>().singleton<lifecycle_probe>();
#ifdef KEEL_APP_MEMORY_PROBE_NEEDS_REDIS
    r.singleton<redis_user>();
#endif
}

}  // namespace memory_probe

int main(int argc, char** argv) {
    return keel::app::application("keel-app-memory-probe")
        .without_redis()
        .services(memory_probe::add_services)
        .processes(memory_probe::counting)
        .controllers<memory_probe::count_controller>()
        .run(argc, argv);
}
