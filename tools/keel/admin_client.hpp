#pragma once

// The admin API as JSON in, JSON out: sends the bearer token with every request, turns a
// non-2xx answer into api_error (status plus the problem's detail) and an answer that is
// not JSON into transport_error. Targets are built by the caller (see encoding.hpp).

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "http_client.hpp"

namespace keel::cli {

struct connection_options {
    std::string url = "http://127.0.0.1:8080";
    std::string token;  // empty: no Authorization header
    std::chrono::milliseconds timeout = std::chrono::seconds(10);
};

class admin_client {
  public:
    // Throws usage_error for an unusable URL or token; connects on the first request.
    explicit admin_client(const connection_options& options);

    nlohmann::json get(std::string_view target);
    // POSTs `body` as application/json, or nothing when it is empty.
    nlohmann::json post(std::string_view target, const std::optional<nlohmann::json>& body = {},
                        header_list headers = {});

  private:
    nlohmann::json exchange(http_request request);

    http_client http_;
    std::string token_;
};

}  // namespace keel::cli
