#pragma once

// A stand-in for a service's admin API, for the tests of the keel command line only: an
// in-process test_server whose routes answer as docs/admin-api.md says, from fixed data,
// and record every request they receive (method, raw target, decoded path parameter,
// query, Authorization, Idempotency-Key, body). The real API is tested end to end
// elsewhere.
//
// Data: five instances "fulfil/o-5" (newest) .. "fulfil/o-1", paged by opaque cursors
// full of characters that need encoding; a journal of 90 entries served at most 40 per
// page; "done/o-9" is final (cancel: 409); "missing" does not exist (404); the token is
// "s3cret".

#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace keel::cli::testing {

struct recorded_request {
    std::string method;
    std::string target;  // as sent, undecoded
    std::string param;   // the decoded wildcard (instance id or signal path), if any
    std::vector<std::pair<std::string, std::string>> query;  // decoded
    std::string authorization;
    std::string idempotency_key;
    std::string content_type;
    std::string body;

    std::string query_value(std::string_view name) const;
};

class fake_admin {
  public:
    static constexpr std::string_view token = "s3cret";
    static constexpr int instance_count = 5;
    static constexpr int journal_length = 90;
    static constexpr int journal_page_limit = 40;

    fake_admin();
    ~fake_admin();

    std::string url() const;
    std::vector<recorded_request> requests() const;
    // The cursors the list handed out, in order.
    std::vector<std::string> issued_cursors() const;

  private:
    void add_routes();
    recorded_request record(const http::request& req, std::string_view param_name);
    http::response list(const http::request& req);
    http::response journal(const http::request& req);

    http::router router_;
    mutable std::mutex mutex_;
    std::vector<recorded_request> requests_;
    std::vector<std::string> cursors_;
    std::unique_ptr<http::testing::test_server> server_;
};

}  // namespace keel::cli::testing
