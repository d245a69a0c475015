#include "webhook_receiver.hpp"

#include <keel/http/request.hpp>
#include <keel/http/response.hpp>

#include "tls_support.hpp"

namespace billing::sim::testing {

namespace http = keel::http;

webhook_receiver::webhook_receiver(std::vector<http::status> script, bool tls)
    : tls_(tls), script_(std::move(script)) {
    router_.post("/hooks", [this](http::request& req) -> boost::asio::awaitable<http::response> {
        delivery d{std::string(req.body()), std::string(req.header("X-Signature").value_or("")),
                   std::string(req.header("Content-Type").value_or("")),
                   std::chrono::steady_clock::now()};
        auto status = answer_to(std::move(d));
        co_return http::response::text("noted", status);
    });
    http::testing::test_server_options options;
    if (tls_) {
        options.server.tls.certificate_file = http::client_test::pki().good.cert;
        options.server.tls.private_key_file = http::client_test::pki().good.key;
    }
    server_ = std::make_unique<http::testing::test_server>(router_, options);
}

webhook_receiver::~webhook_receiver() = default;

std::string webhook_receiver::url() const {
    auto port = std::to_string(server_->port());
    return tls_ ? "https://localhost:" + port + "/hooks" : "http://127.0.0.1:" + port + "/hooks";
}

std::vector<delivery> webhook_receiver::deliveries() const {
    std::lock_guard lock(mutex_);
    return deliveries_;
}

bool webhook_receiver::wait_for(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return arrived_.wait_for(lock, timeout, [&] { return deliveries_.size() >= n; });
}

http::status webhook_receiver::answer_to(delivery d) {
    std::lock_guard lock(mutex_);
    auto index = deliveries_.size();
    deliveries_.push_back(std::move(d));
    arrived_.notify_all();
    return index < script_.size() ? script_[index] : http::status::ok;
}

}  // namespace billing::sim::testing
