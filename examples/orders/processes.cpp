#include "processes.hpp"

#include <cstdio>
#include <keel/process/context.hpp>

#include "dispatch.hpp"

namespace orders {

using keel::process::context;
using keel::process::durable;

keel::process::retry_policy patient() {
    keel::process::retry_policy p;
    p.max_attempts = 20;
    p.initial_backoff = std::chrono::milliseconds(50);
    p.max_backoff = std::chrono::seconds(2);
    return p;
}

durable<fulfillment> fulfil(context& ctx, keel::ref<order> o, payment_signals& payments,
                            shipping_signals& shipping, order_book& orders, settings& config) {
    auto expiry = ctx.timer(config.payment_timeout, "payment timeout");
    auto first = co_await ctx.race(payments.received, payments.failed, expiry);
    // The changes are named before the co_await (g++ 12: docs/guide/coroutines.md).
    auto& book = orders.repository();
    if (first.is(payments.failed)) {
        set_status failed{"payment_failed"};
        co_await ctx.update("mark payment failed", book, o, failed);
        co_return fulfillment{"payment_failed"};
    }
    if (first.is(expiry)) {
        expire_order expire;
        co_await ctx.update("expire", book, o, expire);
        co_return fulfillment{"payment_timeout"};
    }
    record_payment paid{first.get(payments.received)};
    co_await ctx.update("record payment", book, o, paid);
    dispatch ship;
    auto policy = dispatch_policy();
    auto step = dispatch_step();
    co_await ctx.update(step, book, o, ship, policy);
    co_await ctx.wait(shipping.delivered);
    set_status delivered{"delivered"};
    co_await ctx.update("mark delivered", book, o, delivered);
    co_return fulfillment{"completed"};
}

namespace {

durable<std::string> send_code(context& ctx, const keel::ref<user>& u, user_book& users) {
    auto n = co_await ctx.random();
    char digits[8];
    std::snprintf(digits, sizeof digits, "%06u", static_cast<unsigned>(n % 1'000'000));
    std::string code = digits;
    record_code sent{code};
    co_await ctx.update("send code", users.repository(), u, sent);
    co_return code;
}

}  // namespace

durable<verification> verify(context& ctx, keel::ref<user> u, verification_signals& signals,
                             user_book& users, settings& config) {
    auto deadline = (co_await ctx.now()) + config.verification_timeout;
    std::string code = co_await send_code(ctx, u, users);
    int resends = 0;
    int attempts = 0;
    for (;;) {
        // The timer below ends the wait at the deadline; instances started before that was
        // seen also read the clock here each round, and replay it (docs/versioning.md).
        if (!ctx.patched("no clock check per round")) {
            auto now = co_await ctx.now();
            if (now >= deadline) co_return verification{false, "timeout", attempts};
        }
        auto expiry = ctx.timer_at(deadline, "verification timeout");
        auto next = co_await ctx.race(signals.code_submitted, signals.resend_requested, expiry);
        if (next.is(signals.code_submitted)) {
            ++attempts;
            if (next.get(signals.code_submitted) == code) {
                mark_verified verified;
                co_await ctx.update("mark verified", users.repository(), u, verified);
                co_return verification{true, "verified", attempts};
            }
            if (attempts >= max_attempts)
                co_return verification{false, "too_many_attempts", attempts};
        } else if (next.is(signals.resend_requested)) {
            if (resends < max_resends) {
                ++resends;
                code = co_await send_code(ctx, u, users);
            }
        } else {
            co_return verification{false, "timeout", attempts};
        }
    }
}

}  // namespace orders
