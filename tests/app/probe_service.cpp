// keel-app-probe: a small service on keel::app::application, for the application root's
// end-to-end tests. Settings of every type, a singleton with a lifecycle, a slow route (to
// see shutdown drain it), a signal group that only a controller emits, and a process whose
// handler needs a service. Built twice: KEEL_APP_PROBE_FORGET_COUNTER leaves that service
// unregistered, which must stop the start with the graph's error.

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/app/application.hpp>
#include <keel/process/context.hpp>
#include <stdexcept>

namespace probe {

namespace asio = boost::asio;
using keel::http::request;
using keel::http::response;

struct settings {
    std::int64_t answer = 42;
    std::uint16_t small = 7;
    double ratio = 0.5;
    bool loud = false;
    std::string greeting = "hello";
    keel::duration slow = std::chrono::milliseconds(300);
    bool fail_stop = false;
};

void declare(keel::app::settings_schema<settings>& s) {
    s.add("answer", &settings::answer, "a number")
        .add("small", &settings::small, "a number that fits 16 bits")
        .add("ratio", &settings::ratio, "a fraction", {.min = 0, .max = 1})
        .add("loud", &settings::loud, "a switch")
        .add("greeting", &settings::greeting, "a word",
             keel::app::setting_check<std::string>(
                 [](const std::string& g) -> std::optional<std::string> {
                     if (g.find(' ') == std::string::npos) return std::nullopt;
                     return "one word, without spaces";
                 }))
        .add("slow", &settings::slow, "how long GET /slow takes")
        .add("fail_stop", &settings::fail_stop, "make the lifecycle probe's stop() throw");
}

// Logs its lifecycle; the shutdown test reads the order from the log.
struct lifecycle_probe {
    using inject = keel::di::inject<keel::redis::connection&, settings&>;
    lifecycle_probe(keel::redis::connection&, settings& s) : fail_stop(s.fail_stop) {}
    void start() { log.info("probe started"); }
    void stop() {
        if (fail_stop) throw std::runtime_error("the probe would not stop");
        log.info("probe stopped");
    }
    bool fail_stop;
    keel::log::logger log{"probe"};
};

struct widget {
    static constexpr std::string_view model_name = "widget";
    std::string id;
};

// No process waits for these: only the controller emits them.
struct widget_signals : keel::signal_group {
    keel::signal<void, widget> poked{this, "/widget/:widget/poked"};
};

struct counter {
    int next() { return ++value; }
    int value = 0;
};

keel::process::durable<int> count(keel::process::context& ctx, std::string, counter& c) {
    co_return co_await ctx.run("count", [&]() -> asio::awaitable<int> { co_return c.next(); });
}
inline const auto counting = keel::process::define<count>("/count/:name");

class probe_controller {
  public:
    using inject =
        keel::di::inject<settings&, widget_signals&, keel::process::engine&, lifecycle_probe&>;
    probe_controller(settings& s, widget_signals& w, keel::process::engine& e, lifecycle_probe&)
        : settings_(s), widgets_(w), engine_(e) {}

    static void routes(keel::http::controller_routes<probe_controller>& r) {
        r.get("/settings", &probe_controller::show_settings);
        r.get("/slow", &probe_controller::slow);
        r.post("/poke/:widget", &probe_controller::poke);
        r.post("/count/:name", &probe_controller::start_count);
    }

    asio::awaitable<response> show_settings(request&) {
        co_return response::json(
            {{"answer", settings_.answer},
             {"small", settings_.small},
             {"ratio", settings_.ratio},
             {"loud", settings_.loud},
             {"greeting", settings_.greeting},
             {"slow_ms",
              std::chrono::duration_cast<std::chrono::milliseconds>(settings_.slow).count()}});
    }
    asio::awaitable<response> slow(request&) {
        asio::steady_timer t(co_await asio::this_coro::executor, settings_.slow);
        co_await t.async_wait(asio::use_awaitable);
        log_.info("slow request done");
        co_return response::json({{"done", true}});
    }
    asio::awaitable<response> poke(request& req) {
        keel::ref<widget> w(std::string(req.param("widget")));
        auto sent = co_await widgets_.poked.emit(w);
        co_return response::json({{"reached", sent.reached}});
    }
    asio::awaitable<response> start_count(request& req) {
        auto handle = co_await engine_.start(counting, std::string(req.param("name")));
        auto result = co_await handle.wait();
        co_return response::json({{"count", result ? *result : -1}});
    }

  private:
    settings& settings_;
    widget_signals& widgets_;
    keel::process::engine& engine_;
    keel::log::logger log_{"probe"};
};

void add_services(keel::di::registry& r) {
    r.singleton<lifecycle_probe>();
#ifndef KEEL_APP_PROBE_FORGET_COUNTER
    r.singleton<counter>();
#endif
}

}  // namespace probe

int main(int argc, char** argv) {
    return keel::app::application("keel-app-probe")
        .settings(probe::declare)
        .services(probe::add_services)
        .signals<probe::widget_signals>()
        .processes(probe::counting)
        .controllers<probe::probe_controller>()
        .run(argc, argv);
}
