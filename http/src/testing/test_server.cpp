#include <keel/http/testing.hpp>

namespace keel::http::testing {

test_server::test_server(const http::router& router, test_server_options options) {
    keel::service_options service_options;
    service_options.threads = options.threads;
    service_options.handle_signals = false;
    service_options.drain_timeout = options.drain_timeout;
    service_ = std::make_unique<keel::service>(service_options);
    auto server_options = options.server;
    server_options.address = "127.0.0.1";
    server_options.port = 0;
    server_ = std::make_unique<http::server>(*service_, router, server_options);
    server_->start();
    runner_ = std::thread([this] { service_->run(); });
}

test_server::~test_server() {
    begin_stop();
    wait_stopped();
    // The server's sockets and timers belong to the service's io_contexts: it goes first.
    server_.reset();
    service_.reset();
}

void test_server::wait_stopped() {
    if (runner_.joinable()) runner_.join();
}

}  // namespace keel::http::testing
