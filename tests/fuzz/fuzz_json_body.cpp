// fuzz_json_body: JSON request bodies decoded the way a controller does it, through
// request::try_json<T>() and from_json functions written with keel::http::read_field, for a
// type with nested objects, strings, doubles, int64s, optionals and a vector of structs.
//
// Input: the body (Content-Type application/json). The outcome is a value or a 400 problem,
// nothing else may escape. A problem's field is a JSON pointer whose parent exists in the
// document (the member or element it names is in it, or is the one missing); json<T>()
// throws exactly when try_json<T>() fails; a decoded value agrees with the document; every
// problem renders as problem+json.

#include <cstdint>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"

namespace shop {

using keel::http::read_field;

struct line_item {
    std::string sku;
    std::int64_t quantity = 0;
    double price = 0;
    std::optional<std::string> note;
};

struct address {
    std::string street;
    std::optional<std::string> city;
    std::optional<std::vector<std::string>> extra_lines;
};

struct order {
    std::string id;
    double total = 0;
    std::int64_t version = 0;
    std::optional<std::int64_t> priority;
    std::optional<bool> gift;
    address ship_to;
    std::vector<line_item> lines;
    std::optional<std::vector<line_item>> returns;
};

void from_json(const nlohmann::json& j, line_item& l) {
    read_field(j, "sku", l.sku);
    read_field(j, "quantity", l.quantity);
    read_field(j, "price", l.price);
    read_field(j, "note", l.note);
}

void from_json(const nlohmann::json& j, address& a) {
    read_field(j, "street", a.street);
    read_field(j, "city", a.city);
    read_field(j, "extra_lines", a.extra_lines);
}

void from_json(const nlohmann::json& j, order& o) {
    read_field(j, "id", o.id);
    read_field(j, "total", o.total);
    read_field(j, "version", o.version);
    read_field(j, "priority", o.priority);
    read_field(j, "gift", o.gift);
    read_field(j, "ship_to", o.ship_to);
    read_field(j, "lines", o.lines);
    read_field(j, "returns", o.returns);
}

}  // namespace shop

namespace {

using namespace keel::http;

void check_renders(const problem& p) {
    auto res = response::problem(p, "fuzz-request");
    auto body = nlohmann::json::parse(res.body(), nullptr, false);
    KEEL_FUZZ_CHECK(body.is_object() && body["status"] == 400);
    if (!p.field.empty()) KEEL_FUZZ_CHECK(body["field"].is_string());
}

void check_pointer(const nlohmann::json& doc, const std::string& field) {
    KEEL_FUZZ_CHECK(field.starts_with('/'));
    try {
        nlohmann::json::json_pointer pointer(field);
        KEEL_FUZZ_CHECK(doc.contains(pointer.parent_pointer()));
    } catch (const nlohmann::json::exception&) {
        KEEL_FUZZ_CHECK(!"a problem's field is not a JSON pointer into the document");
    }
}

void check_value(const nlohmann::json& doc, const shop::order& o) {
    KEEL_FUZZ_CHECK(doc.is_object());
    KEEL_FUZZ_CHECK(o.id == doc["id"].get<std::string>());
    KEEL_FUZZ_CHECK(o.lines.size() == doc["lines"].size());
    KEEL_FUZZ_CHECK(o.ship_to.street == doc["ship_to"]["street"].get<std::string>());
    KEEL_FUZZ_CHECK(o.returns.has_value() ==
                    (doc.contains("returns") && !doc["returns"].is_null()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    request req(method::post, "/orders", headers{{"Content-Type", "application/json"}},
                std::string(keel::fuzz::as_text(data, size)));

    auto value = req.try_json<shop::order>();
    bool threw = false;
    try {
        (void)req.json<shop::order>();
    } catch (const problem_error& e) {
        threw = true;
        KEEL_FUZZ_CHECK(!value && e.problem().field == value.error().field);
    }
    KEEL_FUZZ_CHECK(threw == !value.has_value());

    auto doc = req.json_document();
    if (value) {
        KEEL_FUZZ_CHECK(doc.has_value());
        check_value(**doc, *value);
        return 0;
    }
    const auto& p = value.error();
    KEEL_FUZZ_CHECK(p.status == status::bad_request && !p.detail.empty());
    check_renders(p);
    if (doc && !p.field.empty()) check_pointer(**doc, p.field);
    return 0;
}
