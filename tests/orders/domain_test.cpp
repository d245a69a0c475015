// keel-orders' order text (keel::to_json_text, from its json_fields): byte for byte what nlohmann
// writes from to_json's tree, for orders with and without payments and refunds, strings that need
// escaping, and totals nlohmann writes in exponent form; text that is not UTF-8 is refused
// as nlohmann refuses it.

#include "domain.hpp"

#include <gtest/gtest.h>

#include <keel/framework/json_text.hpp>
#include <limits>

namespace {

using orders::order;
using orders::payment;

static_assert(keel::writes_json_text<order>);  // so repositories write orders with it
static_assert(keel::exact_json<order> && keel::exact_json<orders::user>);

std::string text_of(const order& o) {
    std::string out;
    keel::to_json_text(out, o);
    return out;
}

TEST(order_text, is_the_text_nlohmann_writes) {
    std::vector<order> cases{
        order{},
        order{.id = "o-1", .email = "ann@example.com", .address = "1 Quay St", .total = 19.99},
        order{.id = "o-\"2\"",
              .email = "b\\c@example.com",
              .address = "Flat 3\nRue de l'\xc3\x89glise\t\x01",
              .total = 0.1,
              .status = "paid",
              .payments = {payment{"tx-1", 0.1}}},
        order{.id = "o-3",
              .total = 1e21,
              .status = "expired",
              .payments = {payment{"tx-a", 5}, payment{"tx-\xe2\x82\xac", 1e-7}},
              .refunds = {payment{"tx-r", 5e-324}}},
        order{.id = "o-4", .total = std::numeric_limits<double>::max(), .status = ""},
    };
    for (const auto& o : cases) EXPECT_EQ(text_of(o), nlohmann::json(o).dump());
}

TEST(order_text, refuses_text_that_is_not_utf8_as_nlohmann_does) {
    order o{.id = "o-\xff"};
    EXPECT_THROW((void)nlohmann::json(o).dump(), nlohmann::json::type_error);
    EXPECT_THROW((void)text_of(o), nlohmann::json::type_error);
}

}  // namespace
