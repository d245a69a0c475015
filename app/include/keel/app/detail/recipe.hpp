#pragma once

// What keel::app::application collects before run(): type-erased steps, filled in by its
// templates. Internal to keel::app.

#include <functional>
#include <keel/di/container.hpp>
#include <keel/framework/config.hpp>
#include <keel/http/controller.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/engine.hpp>
#include <keel/signals/signal.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace keel::app {

namespace detail {

// The dependencies of a process handler (its parameters taken by non-const reference), as
// a type whose inject list names them: registering it makes the graph check them.
template <class... D>
struct requirement_list {
    using inject = di::inject<D&...>;
    explicit requirement_list(D&...) {}
};
template <class Args, class... Found>
struct requirements_of;
template <class... Found>
struct requirements_of<std::tuple<>, Found...> {
    using type = requirement_list<Found...>;
};
template <class A, class... Rest, class... Found>
struct requirements_of<std::tuple<A, Rest...>, Found...> {
    using type = std::conditional_t<
        process::detail::is_dependency<A>,
        typename requirements_of<std::tuple<Rest...>, Found..., std::remove_reference_t<A>>::type,
        typename requirements_of<std::tuple<Rest...>, Found...>::type>;
};

}  // namespace detail

// Stands for a process handler's dependencies in the graph (and in its error messages).
template <auto Handler>
struct handler_dependencies
    : detail::requirements_of<
          typename process::detail::handler_traits<decltype(Handler)>::args>::type {
    using base = typename detail::requirements_of<
        typename process::detail::handler_traits<decltype(Handler)>::args>::type;
    using base::base;
};

namespace detail {

struct recipe {
    std::string name;
    std::function<void(config::schema&)> declare_settings;
    std::function<void(const config::values&, di::registry&)> register_settings;
    std::vector<std::function<void(di::registry&)>> registrations;
    std::vector<std::function<signals::signal_group&(const di::container&)>> groups;
    std::vector<std::function<void(process::engine&, const di::container&)>> definitions;
    std::vector<std::function<void(http::router&, const di::container&)>> routes;
    std::vector<std::function<void(http::router&, const di::container&)>> mounts;
    std::string signal_prefix = "/signals";

    void settings(std::function<void(config::schema&)> declare,
                  std::function<void(const config::values&, di::registry&)> add) {
        if (declare_settings) throw std::logic_error("application::settings() given twice");
        declare_settings = std::move(declare);
        register_settings = std::move(add);
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
        registrations.push_back([](di::registry& r) { r.singleton<handler_dependencies<H>>(); });
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
