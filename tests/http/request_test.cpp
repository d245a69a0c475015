// The request API: query, headers, typed parameters, and JSON bodies with problems that
// name the field.

#include <gtest/gtest.h>

#include <keel/framework/repository.hpp>
#include <keel/http/problem.hpp>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>

namespace keel::http {
namespace {

struct line {
    std::string sku;
    int quantity = 0;
};
void from_json(const nlohmann::json& j, line& l) {
    read_field(j, "sku", l.sku);
    read_field(j, "quantity", l.quantity);
}

struct order {
    std::vector<line> lines;
    std::optional<std::string> note;
};
void from_json(const nlohmann::json& j, order& o) {
    read_field(j, "lines", o.lines);
    read_field(j, "note", o.note);
}

// A type converted with nlohmann's own accessors (no read_field).
struct plain {
    int amount = 0;
};
void from_json(const nlohmann::json& j, plain& p) {
    j.at("amount").get_to(p.amount);
}

request json_request(std::string body, std::string type = "application/json") {
    headers h;
    if (!type.empty()) h.add("Content-Type", type);
    return request(method::post, "/orders", std::move(h), std::move(body));
}

problem problem_of(const request& req) {
    auto r = req.try_json<order>();
    EXPECT_FALSE(r.has_value());
    return r ? problem{} : r.error();
}

TEST(request, splits_path_and_decodes_query) {
    request req(method::get, "/search?q=a+b%21&page=2&flag&q=second");
    EXPECT_EQ(req.path(), "/search");
    EXPECT_EQ(req.query("q"), "a b!");
    EXPECT_EQ(req.query("page"), "2");
    EXPECT_EQ(req.query("flag"), "");
    EXPECT_FALSE(req.query("missing"));
    EXPECT_EQ(req.query_params().size(), 4u);
}

TEST(request, malformed_query_escape_is_a_400_problem) {
    request req(method::get, "/search?q=%G1");
    try {
        (void)req.query("q");
        FAIL() << "expected problem_error";
    } catch (const problem_error& e) {
        EXPECT_EQ(e.problem().status, status::bad_request);
    }
}

TEST(request, headers_are_case_insensitive_and_idempotency_key_is_exposed) {
    headers h;
    h.add("idempotency-key", "abc-123");
    h.add("Content-Type", "Application/JSON; charset=utf-8");
    request req(method::post, "/", std::move(h));
    EXPECT_EQ(req.idempotency_key(), "abc-123");
    EXPECT_EQ(req.header("IDEMPOTENCY-KEY"), "abc-123");
    EXPECT_EQ(req.content_type(), "application/json");
    EXPECT_FALSE(request(method::get, "/").idempotency_key());
}

TEST(request, typed_params_convert_or_throw_400) {
    request req(method::get, "/x");
    req.add_param("id", "42");
    req.add_param("name", "ada");
    EXPECT_EQ(req.param<std::int64_t>("id"), 42);
    EXPECT_EQ(req.param<int>("id"), 42);
    EXPECT_EQ(req.param<std::string>("name"), "ada");
    try {
        (void)req.param<int>("name");
        FAIL();
    } catch (const problem_error& e) {
        EXPECT_EQ(e.problem().field, "name");
    }
    EXPECT_THROW((void)req.param("missing"), std::out_of_range);
}

TEST(request, parses_a_valid_json_body) {
    auto req = json_request(R"({"lines":[{"sku":"a","quantity":2}],"note":null})");
    auto o = req.json<order>();
    ASSERT_EQ(o.lines.size(), 1u);
    EXPECT_EQ(o.lines[0].sku, "a");
    EXPECT_EQ(o.lines[0].quantity, 2);
    EXPECT_FALSE(o.note);
    EXPECT_EQ(
        json_request(R"({"lines":[]})", "application/vnd.keel+json").json<order>().lines.size(),
        0u);
}

TEST(request, wrong_content_type_is_415) {
    EXPECT_EQ(problem_of(json_request("{}", "text/plain")).status, status::unsupported_media_type);
    EXPECT_EQ(problem_of(json_request("{}", "")).status, status::unsupported_media_type);
}

TEST(request, invalid_json_is_400) {
    auto p = problem_of(json_request(R"({"lines": [)"));
    EXPECT_EQ(p.status, status::bad_request);
    EXPECT_NE(p.detail.find("invalid JSON"), std::string::npos) << p.detail;
    EXPECT_EQ(problem_of(json_request("")).status, status::bad_request);
}

TEST(request, missing_field_is_400_naming_it) {
    auto p = problem_of(json_request(R"({"lines":[{"sku":"a"}]})"));
    EXPECT_EQ(p.status, status::bad_request);
    EXPECT_EQ(p.field, "/lines/0/quantity");
    EXPECT_NE(p.detail.find("/lines/0/quantity"), std::string::npos);
    EXPECT_EQ(problem_of(json_request(R"({})")).field, "/lines");
}

TEST(request, wrong_type_is_400_naming_the_field) {
    auto p = problem_of(
        json_request(R"({"lines":[{"sku":"a","quantity":1},{"sku":"b","quantity":"x"}]})"));
    EXPECT_EQ(p.status, status::bad_request);
    EXPECT_EQ(p.field, "/lines/1/quantity");
    EXPECT_EQ(problem_of(json_request(R"({"lines":{}})")).field, "/lines");
    EXPECT_EQ(problem_of(json_request(R"({"lines":[],"note":5})")).field, "/note");
    EXPECT_EQ(problem_of(json_request(R"([1,2])")).status, status::bad_request);
}

TEST(request, nlohmann_accessors_still_name_a_missing_key) {
    auto p = json_request(R"({})").try_json<plain>();
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().field, "/amount");
    auto wrong = json_request(R"({"amount":"x"})").try_json<plain>();
    ASSERT_FALSE(wrong);
    EXPECT_EQ(wrong.error().status, status::bad_request);
}

TEST(request, json_throws_problem_error) {
    auto req = json_request(R"({"lines":"nope"})");
    try {
        (void)req.json<order>();
        FAIL();
    } catch (const problem_error& e) {
        EXPECT_EQ(e.problem().field, "/lines");
    }
}

TEST(response, helpers_set_status_type_and_body) {
    auto j = response::json({{"a", 1}}, status::created).header("Location", "/a/1");
    EXPECT_EQ(j.status(), status::created);
    EXPECT_EQ(j.header("content-type"), "application/json");
    EXPECT_EQ(j.body(), R"({"a":1})");
    EXPECT_EQ(j.header("Location"), "/a/1");
    auto t = response::text("hi");
    EXPECT_EQ(t.header("Content-Type"), "text/plain; charset=utf-8");
    auto p = response::problem(problem{status::conflict, "taken", "/name"}, "rid-1");
    auto body = nlohmann::json::parse(p.body());
    EXPECT_EQ(body["title"], "Conflict");
    EXPECT_EQ(body["status"], 409);
    EXPECT_EQ(body["field"], "/name");
    EXPECT_EQ(body["request_id"], "rid-1");
    EXPECT_EQ(body["type"], "about:blank");
}

}  // namespace
}  // namespace keel::http

namespace {

TEST(request_helpers, a_repository_failure_answers_with_the_status_a_client_can_act_on) {
    using code = keel::model_error::code;
    auto status_of = [](code c) {
        return keel::http::problem_of(keel::model_error{c, "why"}).problem().status;
    };
    EXPECT_EQ(status_of(code::lock_timeout), keel::http::status::conflict);
    EXPECT_EQ(status_of(code::lock_lost), keel::http::status::conflict);
    EXPECT_EQ(status_of(code::unavailable), keel::http::status::service_unavailable);
    EXPECT_EQ(status_of(code::invalid_document), keel::http::status::internal_server_error);
    auto busy = keel::http::problem_of(keel::model_error{code::lock_timeout, "held by w-2"});
    EXPECT_NE(busy.problem().detail.find("held by w-2"), std::string::npos);
}

TEST(request_helpers, a_plain_id_is_letters_digits_and_three_marks) {
    EXPECT_NO_THROW(keel::http::require_plain_id("o-17_a.b", "/id"));
    EXPECT_NO_THROW(keel::http::require_plain_id(std::string(128, 'x'), "/id"));
    for (std::string bad : {std::string(), std::string(129, 'x'), std::string("a/b"),
                            std::string("a b"), std::string("a%2Fb"), std::string("a\nb"),
                            std::string("caf\xc3\xa9"), std::string("*")}) {
        try {
            keel::http::require_plain_id(bad, "/orderId");
            ADD_FAILURE() << "accepted \"" << bad << "\"";
        } catch (const keel::http::problem_error& e) {
            EXPECT_EQ(e.problem().status, keel::http::status::bad_request);
            EXPECT_EQ(e.problem().field, "/orderId");
        }
    }
}

}  // namespace
