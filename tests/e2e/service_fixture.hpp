#pragma once

// A GoogleTest fixture for end-to-end tests of one service binary on a redis-server of its
// own: start(binary, flags) runs it, and when the test has failed the service's log is
// printed at the end.

#include <gtest/gtest.h>

#include <keel/test/redis_server.hpp>
#include <memory>
#include <string>
#include <vector>

#include "service_process.hpp"

namespace keel::e2e {

class service_fixture : public ::testing::Test {
  protected:
    void start(const std::string& binary, std::vector<std::string> extra_args = {}) {
        if (!redis) redis = std::make_unique<keel::test::redis_server>();
        service = std::make_unique<service_process>(service_options{
            .binary = binary,
            .redis_url = redis->url(),
            .extra_args = std::move(extra_args),
        });
        service->start();
    }
    void TearDown() override {
        if (HasFailure() && service) service->print_log();
    }

    std::unique_ptr<keel::test::redis_server> redis;
    std::unique_ptr<service_process> service;
};

}  // namespace keel::e2e
