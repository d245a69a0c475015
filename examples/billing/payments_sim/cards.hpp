#pragma once

// The sim's test cards: what a charge on a card answers, given how many charges that card
// has had before. Like real providers' test cards, a well-formed number that is not one of
// them is declined (not refused as bad input), so a client sees the answer it must handle.
//
//   4242424242424242  succeeded
//   4000000000000002  declined
//   4000000000009995  declined on its first two charges, succeeded from the third
//   4000000000000077  pending; succeeded after --pending-delay, with a webhook
//   any other         declined

#include <string>
#include <string_view>

namespace billing::sim {

enum class charge_status { succeeded, declined, pending };

// "succeeded", "declined", "pending": the spelling of the API.
std::string_view to_string(charge_status status);

// What a charge on `card` answers when it is the card's charge number `nth` (1: its first).
charge_status outcome_for(std::string_view card, int nth);

// Whether `card` is a card number the sim accepts at all: 12 to 19 digits.
bool well_formed_card(std::string_view card);

// The last four digits, all that the sim shows of a card.
std::string last4(std::string_view card);

}  // namespace billing::sim
