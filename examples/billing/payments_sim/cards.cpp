#include "cards.hpp"

#include <algorithm>

namespace billing::sim {

std::string_view to_string(charge_status status) {
    switch (status) {
        case charge_status::succeeded:
            return "succeeded";
        case charge_status::declined:
            return "declined";
        case charge_status::pending:
            return "pending";
    }
    return "unknown";
}

charge_status outcome_for(std::string_view card, int nth) {
    if (card == "4242424242424242") return charge_status::succeeded;
    if (card == "4000000000009995")
        return nth >= 3 ? charge_status::succeeded : charge_status::declined;
    if (card == "4000000000000077") return charge_status::pending;
    return charge_status::declined;  // 4000000000000002, and every unknown card
}

bool well_formed_card(std::string_view card) {
    return card.size() >= 12 && card.size() <= 19 &&
           std::all_of(card.begin(), card.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string last4(std::string_view card) {
    return std::string(card.substr(card.size() < 4 ? 0 : card.size() - 4));
}

}  // namespace billing::sim
