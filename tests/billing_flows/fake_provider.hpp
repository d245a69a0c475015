#pragma once

// A payment provider for the flows' unit tests: each charge is a journaled step (ctx.run,
// under the step name the service's ctx.http call would have), answered by the card's
// script, and recorded.
//
//   "ok"              succeeded
//   "declined"        declined, always
//   "declined-twice"  declined twice, then succeeded
//   "pending"         pending (a webhook settles it)
//   anything else     declined

#include <map>
#include <string>
#include <vector>

#include "provider.hpp"

namespace billing::test {

class fake_provider final : public payment_provider {
  public:
    struct call {
        std::string step;
        charge_request request;
    };

    keel::process::durable<charge_result> charge(keel::process::context& ctx, std::string step,
                                                 charge_request request) override {
        auto answer = [this, step, request] { return this->answer(step, request); };
        auto result = co_await ctx.run(step, answer);
        co_return result;
    }

    const std::vector<call>& calls() const { return calls_; }

  private:
    charge_result answer(const std::string& step, const charge_request& r) {
        calls_.push_back({step, r});
        int n = ++attempts_[r.reference];
        charge_result out{.id = "ch_" + r.reference + "_" + std::to_string(n),
                          .status = "declined",
                          .detail = {}};
        if (r.card == "ok") out.status = "succeeded";
        if (r.card == "pending") out.status = "pending";
        if (r.card == "declined-twice" && n > 2) out.status = "succeeded";
        return out;
    }

    std::vector<call> calls_;
    std::map<std::string, int> attempts_;
};

}  // namespace billing::test
