#pragma once

// What keel::app::application collects before run(): type-erased steps, filled in by its
// templates. Internal to keel::app.

#include <functional>
#include <keel/app/settings.hpp>
#include <keel/di/container.hpp>
#include <keel/framework/config.hpp>
#include <keel/http/controller.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/dependencies.hpp>
#include <keel/process/engine.hpp>
#include <keel/signals/signal.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace keel::app {

namespace detail {

struct recipe {
    std::string name;
    std::function<void(config::schema&)> declare_settings;
    std::function<void(const config::values&, di::registry&)> register_settings;
    // The service's own checks of its options' values (settings_schema::refused).
    std::function<std::optional<refused_setting>(const config::values&)> check_settings;
    std::vector<std::function<void(di::registry&)>> registrations;
    std::vector<std::function<signals::signal_group&(const di::container&)>> groups;
    std::vector<std::function<void(process::engine&, const di::container&)>> definitions;
    std::vector<std::function<void(http::router&, const di::container&)>> routes;
    std::vector<std::function<void(http::router&, const di::container&)>> mounts;
    std::string signal_prefix = "/signals";
    bool redis = true;          // false: application::without_redis()
    bool tls_required = false;  // application::require_tls()

    void settings(std::function<void(config::schema&)> declare,
                  std::function<void(const config::values&, di::registry&)> add,
                  std::function<std::optional<refused_setting>(const config::values&)> check) {
        if (declare_settings) throw std::logic_error("application::settings() given twice");
        declare_settings = std::move(declare);
        register_settings = std::move(add);
        check_settings = std::move(check);
    }

    template <class G>
    void signal_group() {
        static_assert(std::derived_from<G, signals::signal_group>,
                      "application::signals<G>(): G is a keel::signals::signal_group");
        registrations.push_back([](di::registry& r) {
            if (!r.contains<G>()) r.singleton<G>();
        });
        groups.push_back(
            [](const di::container& c) -> signals::signal_group& { return c.get<G>(); });
    }

    template <auto H>
    void process(const process::definition<H>& def) {
        registrations.push_back(
            [](di::registry& r) { r.singleton<process::handler_dependencies<H>>(); });
        definitions.push_back(
            [def](process::engine& engine, const di::container& c) { engine.add(def, c); });
    }

    template <class C>
    void controller() {
        registrations.push_back([](di::registry& r) {
            if (!r.contains<C>()) r.singleton<C>();
        });
        mounts.push_back([](http::router& r, const di::container& c) { http::mount<C>(r, c); });
    }
};

}  // namespace detail
}  // namespace keel::app
