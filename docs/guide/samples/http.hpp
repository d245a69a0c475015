// What the samples of http.md take as given.
#pragma once

#include <keel/di/container.hpp>
#include <keel/framework/documents.hpp>
#include <keel/framework/model.hpp>
#include <keel/http/controller.hpp>
#include <keel/http/json.hpp>
#include <keel/http/middleware.hpp>
#include <keel/http/problem.hpp>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>
#include <keel/http/router.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/engine.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

using keel::http::request;
using keel::http::response;

struct order {
    static constexpr std::string_view model_name = "order";
    std::string id;
};

struct new_order {
    std::string id;
};
void from_json(const nlohmann::json& j, new_order& o);

keel::process::durable<void> fulfil(keel::process::context& ctx, keel::ref<order> o);
inline constexpr auto fulfilment = keel::process::define<fulfil>("/order/:order/fulfillment");

class order_book {
  public:
    using inject = keel::di::inject<keel::documents&>;
    explicit order_book(keel::documents& docs);
};

struct payment_gateway {
    virtual ~payment_gateway() = default;
};
struct stripe_gateway : payment_gateway {};

struct mailer {
    explicit mailer(std::string smtp_url);
};

struct audit_trail {};

struct settings {
    std::string smtp_url;
};

extern keel::http::router& router;
extern std::string secret;

}  // namespace guide_samples
