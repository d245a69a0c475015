// What the samples of coroutines.md take as given.
#pragma once

#include <keel/framework/model.hpp>
#include <keel/framework/repository.hpp>
#include <keel/framework/service.hpp>
#include <keel/process/context.hpp>

namespace asio = boost::asio;

namespace guide_samples {

struct order {
    static constexpr std::string_view model_name = "order";
    std::string id;
    std::string status;
};
void to_json(nlohmann::json& j, const order& o);
void from_json(const nlohmann::json& j, order& o);

struct set_status {
    std::string status;
    bool operator()(std::optional<order>& o) const;
};

asio::awaitable<std::string> from_cache(const std::string& id);
asio::awaitable<std::string> from_store(const std::string& id);
asio::awaitable<void> work();

extern keel::process::context& ctx;
extern keel::repository<order>& book;
extern keel::ref<order> o;
extern keel::service& service;
extern bool cached;
extern std::string id;

}  // namespace guide_samples
