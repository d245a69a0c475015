#include "greeting_controller.hpp"

#include <keel/http/response.hpp>

namespace greeter {

void greeting_controller::routes(keel::http::controller_routes<greeting_controller>& r) {
    r.get("/greet/:name", &greeting_controller::greet);
}

boost::asio::awaitable<keel::http::response> greeting_controller::greet(keel::http::request& req) {
    co_return keel::http::response::json(
        {{"message", settings_.greeting + ", " + std::string(req.param("name"))}});
}

}  // namespace greeter
