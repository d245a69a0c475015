#pragma once

/// @file
/// Process definitions: a path pattern, typed parameters, injected dependencies and a handler.
///
/// @code
///   durable<fulfillment> fulfil(context& ctx, keel::ref<order> o, payment_gateway& payments);
///   inline constexpr auto order_fulfillment =
///       keel::process::define<fulfil>("/order/:order/fulfillment").retry(patient);
/// @endcode
///
/// The handler's first parameter is the context. Parameters taken by value (ref<T>, strings,
/// integers) are the instance's parameters and fill the pattern's `:name` segments in order;
/// the pattern is checked at compile time against them. Parameters taken by non-const
/// reference are dependencies, resolved by type from a resolver (keel::di::container or
/// anything with `template <class T> T& get()`) every time the instance is (re)loaded.
/// The instance id is the filled path without its leading slash: "order/order-123/fulfillment".
/// `.retry(policy)` gives the definition's steps a default retry policy: every ctx.run that
/// passes none retries with it (a policy given at the call wins). `policy` is a function
/// returning the retry_policy (a named function or a captureless lambda), so that a
/// definition stays a constexpr value. A definition is an immutable value; thread-safe.

#include <concepts>
#include <cstddef>
#include <keel/framework/model.hpp>
#include <keel/framework/path_pattern.hpp>
#include <keel/process/context.hpp>
#include <keel/process/durable.hpp>
#include <keel/process/retry.hpp>
#include <keel/signals/signal.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace keel::process {

namespace detail {

template <class A>
inline constexpr bool is_dependency =
    std::is_lvalue_reference_v<A> && !std::is_const_v<std::remove_reference_t<A>>;

template <class H>
struct handler_traits;

template <class R, class... A>
struct handler_traits<durable<R> (*)(context&, A...)> {
    using result_type = R;
    using args = std::tuple<A...>;
    // The parameters an instance is started with: the arguments that are not dependencies.
    using params = decltype(std::tuple_cat(
        std::declval<std::conditional_t<is_dependency<A>, std::tuple<>,
                                        std::tuple<std::remove_cvref_t<A>>>>()...));
    static constexpr std::size_t arity = sizeof...(A);
    static constexpr std::size_t param_count = (std::size_t{0} + ... + (is_dependency<A> ? 0 : 1));
    template <std::size_t I>
    static constexpr std::size_t param_index() {
        constexpr bool deps[] = {is_dependency<A>..., false};
        std::size_t k = 0;
        for (std::size_t i = 0; i < I; ++i)
            if (!deps[i]) ++k;
        return k;
    }
};

template <class T>
struct is_ref : std::false_type {};
template <class T>
struct is_ref<keel::ref<T>> : std::true_type {};

template <class P>
concept path_parameter = is_ref<P>::value || std::same_as<P, std::string> || std::integral<P>;

template <class P>
std::string segment_of(const P& p) {
    if constexpr (is_ref<P>::value)
        return p.id();
    else if constexpr (std::same_as<P, std::string>)
        return p;
    else
        return std::to_string(p);
}

}  // namespace detail

/// A path pattern with exactly N `:name` segments (keel::path_pattern), checked at compile
/// time.
template <std::size_t N>
using pattern = keel::path_pattern<N>;

/// A process definition: handler `Handler`, its path pattern, and optionally its steps'
/// default retry policy and its code's version (see the file's description). Make one with
/// define().
template <auto Handler>
class definition {
    using traits = detail::handler_traits<decltype(Handler)>;

  public:
    using result_type = typename traits::result_type;  ///< what the handler returns
    /// How many parameters an instance is started with (those that are not dependencies).
    static constexpr std::size_t param_count = traits::param_count;

    /// Makes the default retry policy of the definition's steps.
    using policy_source = retry_policy (*)();

    /// A definition for `pattern`, which is viewed, not copied (a string literal). Unchecked:
    /// define() checks the pattern at compile time.
    explicit constexpr definition(std::string_view pattern) : pattern_(pattern) {}

    /// The same definition, whose steps retry with `policy()` unless the step gives a policy.
    constexpr definition retry(policy_source policy) const {
        definition out = *this;
        out.policy_ = policy;
        return out;
    }

    /// The same definition, labelled with the version of its code: every instance it starts
    /// records it (operators see it in `keel show` and the console while versions coexist;
    /// docs/versioning.md). Versions are ordered (compare_versions): during a rolling deploy
    /// a worker leaves instances started by newer code to the workers that run it. Empty by
    /// default (older than any other). `v` is viewed, not copied (a string literal).
    constexpr definition version(std::string_view v) const {
        definition out = *this;
        out.version_ = v;
        return out;
    }

    /// The pattern, which is also the definition's name in the store.
    std::string_view name() const noexcept { return pattern_; }
    /// The version of its code, as given to version(); empty when none was.
    std::string_view version() const noexcept { return version_; }

    /// The policy of steps that pass none: the one given to retry(), else retry_policy{}.
    retry_policy step_policy() const { return policy_ ? policy_() : retry_policy{}; }

    /// Whether an instance can be started with arguments of types P...: as many as the
    /// handler's parameters, each converting to its parameter's type.
    template <class... P>
    static constexpr bool accepts() {
        if constexpr (sizeof...(P) != param_count) {
            return false;
        } else {
            return []<std::size_t... I>(std::index_sequence<I...>) {
                return (
                    std::is_convertible_v<P, std::tuple_element_t<I, typename traits::params>> &&
                    ...);
            }
            (std::index_sequence_for<P...>{});
        }
    }

    /// The instance id for these parameters; throws std::invalid_argument for a parameter
    /// that is empty or contains '/'.
    template <class... P>
    std::string instance_id(const P&... params) const {
        static_assert(sizeof...(P) == param_count, "wrong number of process parameters");
        std::string segments[] = {detail::segment_of(params)..., std::string()};
        std::string id;
        std::size_t next = 0;
        std::size_t i = 1;
        while (i <= pattern_.size()) {
            auto end = pattern_.find('/', i);
            if (end == std::string_view::npos) end = pattern_.size();
            auto seg = pattern_.substr(i, end - i);
            if (!id.empty()) id += '/';
            if (!seg.empty() && seg.front() == ':') {
                const std::string& value = segments[next++];
                if (value.empty() || value.find('/') != std::string::npos)
                    throw std::invalid_argument(
                        "process " + std::string(pattern_) + ": parameter " + std::string(seg) +
                        " must be a non-empty path segment, got \"" + value + "\"");
                id += value;
            } else {
                id += seg;
            }
            i = end + 1;
        }
        return id;
    }

    /// The parameters as stored with the instance.
    template <class... P>
    static nlohmann::json encode_params(const P&... params) {
        nlohmann::json j = nlohmann::json::array();
        (j.push_back(nlohmann::json(params)), ...);
        return j;
    }

    /// Starts the handler for stored parameters, resolving dependencies from `deps`. The
    /// result is the handler's, encoded as JSON. Throws when the parameters do not decode.
    template <class Resolver>
    durable<nlohmann::json> instantiate(context& ctx, const nlohmann::json& params,
                                        Resolver& deps) const {
        static const auto models = param_models();  // once per definition type
        ctx.set_step_policy(step_policy());
        for (std::size_t i = 0; i < models.size(); ++i)
            if (!models[i].empty()) ctx.bind_entity(models[i], params.at(i).get<std::string>());
        return invoke(ctx, params, deps, std::make_index_sequence<traits::arity>{});
    }

    /// The model name of each value parameter, in order ("" for one that is not a ref<T>):
    /// what signals bind to.
    static std::vector<std::string_view> param_models() {
        std::vector<std::string_view> out;
        collect_models(out, std::make_index_sequence<traits::arity>{});
        return out;
    }

    /// The signal groups among the handler's dependencies, resolved from `deps`.
    template <class Resolver>
    static std::vector<signals::signal_group*> signal_groups(Resolver& deps) {
        std::vector<signals::signal_group*> out;
        collect_groups(out, deps, std::make_index_sequence<traits::arity>{});
        return out;
    }

  private:
    template <std::size_t... I>
    static void collect_models(std::vector<std::string_view>& out, std::index_sequence<I...>) {
        (add_model<std::tuple_element_t<I, typename traits::args>>(out), ...);
    }
    template <class A>
    static void add_model(std::vector<std::string_view>& out) {
        if constexpr (!detail::is_dependency<A>) {
            using P = std::remove_cvref_t<A>;
            if constexpr (detail::is_ref<P>::value)
                out.push_back(P::model_name());
            else
                out.push_back({});
        }
    }
    template <class Resolver, std::size_t... I>
    static void collect_groups(std::vector<signals::signal_group*>& out, Resolver& deps,
                               std::index_sequence<I...>) {
        (add_group<std::tuple_element_t<I, typename traits::args>>(out, deps), ...);
    }
    template <class A, class Resolver>
    static void add_group(std::vector<signals::signal_group*>& out, Resolver& deps) {
        using D = std::remove_reference_t<A>;
        if constexpr (detail::is_dependency<A> && std::derived_from<D, signals::signal_group>)
            out.push_back(&deps.template get<D>());
    }

    template <std::size_t I, class Resolver>
    static decltype(auto) argument(const nlohmann::json& params, Resolver& deps) {
        using A = std::tuple_element_t<I, typename traits::args>;
        if constexpr (detail::is_dependency<A>) {
            return deps.template get<std::remove_reference_t<A>>();
        } else {
            using P = std::remove_cvref_t<A>;
            static_assert(detail::path_parameter<P>,
                          "process parameters are ref<T>, std::string or integers; take "
                          "dependencies by non-const reference");
            return params.at(traits::template param_index<I>()).template get<P>();
        }
    }

    template <class Resolver, std::size_t... I>
    static durable<nlohmann::json> invoke(context& ctx, const nlohmann::json& params,
                                          Resolver& deps, std::index_sequence<I...>) {
        return wrap(Handler(ctx, argument<I>(params, deps)...));
    }

    static durable<nlohmann::json> wrap(durable<result_type> handler) {
        if constexpr (std::is_void_v<result_type>) {
            co_await handler;
            co_return nlohmann::json();
        } else {
            co_return nlohmann::json(co_await handler);
        }
    }

    std::string_view pattern_;
    std::string_view version_;
    policy_source policy_ = nullptr;
};

/// define<handler>("/order/:order/fulfillment"): a definition. The pattern's parameter count
/// is checked against the handler at compile time.
template <auto Handler>
constexpr definition<Handler> define(
    pattern<detail::handler_traits<decltype(Handler)>::param_count> p) {
    return definition<Handler>(p.text);
}

/// The former name of define().
template <auto Handler>
[[deprecated("use keel::process::define")]] constexpr definition<Handler> create_process(
    pattern<detail::handler_traits<decltype(Handler)>::param_count> p) {
    return definition<Handler>(p.text);
}

/// A resolver for handlers without dependencies.
struct no_dependencies {
    /// Does not compile: a handler with dependencies needs a real resolver.
    template <class T>
    T& get() {
        static_assert(sizeof(T) == 0, "this process needs dependencies: pass a resolver");
    }
};

}  // namespace keel::process
