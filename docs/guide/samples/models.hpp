// What the samples of models.md take as given (the model `order` and `order_book` are the
// page's own first sample).
#pragma once

#include <keel/di/inject.hpp>
#include <keel/framework/repository.hpp>
#include <keel/http/problem.hpp>
#include <keel/process/context.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

struct order;

struct payment {
    std::string transaction_id;
    std::int64_t amount = 0;
};

// The change a process step applies: records the payment on the order.
struct record_payment {
    payment p;
    bool operator()(std::optional<order>& o) const;
};

extern keel::process::context& ctx;

}  // namespace guide_samples
