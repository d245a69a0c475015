#pragma once

// The handler a developer edits: GET /greet/:name.

#include <keel/http/controller.hpp>

namespace greeter {

struct settings {
    std::string greeting = "hello";
};

class greeting_controller {
  public:
    using inject = keel::di::inject<settings&>;
    explicit greeting_controller(settings& s) : settings_(s) {}
    static void routes(keel::http::controller_routes<greeting_controller>& r);
    boost::asio::awaitable<keel::http::response> greet(keel::http::request& req);

  private:
    settings& settings_;
};

}  // namespace greeter
