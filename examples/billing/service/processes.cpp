#include "processes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <keel/framework/rfc3339.hpp>
#include <keel/process/child.hpp>
#include <keel/process/context.hpp>
#include <stdexcept>

namespace billing {

using keel::process::context;
using keel::process::durable;

keel::process::retry_policy patient() {
    keel::process::retry_policy p;
    p.max_attempts = 20;
    p.initial_backoff = std::chrono::milliseconds(100);
    p.max_backoff = std::chrono::seconds(5);
    return p;
}

std::int64_t prorate(std::int64_t amount, keel::duration remaining, keel::duration length) {
    if (length.count() <= 0 || remaining.count() <= 0) return 0;
    if (remaining >= length) return amount;
    auto part = static_cast<__int128>(amount) * remaining.count() / length.count();
    return static_cast<std::int64_t>(part);
}

keel::time_point tick_time(std::string_view tick) {
    // YYYYMMDDTHHMMSSZ
    auto bad = [&] { return std::invalid_argument("not a schedule tick: " + std::string(tick)); };
    if (tick.size() != 16 || tick[8] != 'T' || tick[15] != 'Z') throw bad();
    auto number = [&](std::size_t at, std::size_t n) {
        int out = 0;
        auto end = tick.data() + at + n;
        auto [p, ec] = std::from_chars(tick.data() + at, end, out);
        if (ec != std::errc() || p != end) throw bad();
        return out;
    };
    std::chrono::year_month_day day{std::chrono::year(number(0, 4)),
                                    std::chrono::month(number(4, 2)),
                                    std::chrono::day(number(6, 2))};
    if (!day.ok()) throw bad();
    return std::chrono::sys_days(day) + std::chrono::hours(number(9, 2)) +
           std::chrono::minutes(number(11, 2)) + std::chrono::seconds(number(13, 2));
}

namespace {

std::int64_t millis(keel::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// ---- the invoice ----

// What an invoice charges, read once and journaled: replays use it whatever the documents
// and the settings say by then.
struct invoice_terms {
    std::string customer;
    std::string card;
    std::int64_t amount = 0;
    std::vector<std::int64_t> dunning_ms;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(invoice_terms, customer, card, amount, dunning_ms)
};

// Waits until `until` for the provider's word on this invoice's charges: the id of the
// charge that succeeded, or nullopt when the time ran out or the charge `pending` was
// declined. Events about other charges are dropped.
durable<std::optional<std::string>> settle(context& ctx, keel::time_point until, std::string name,
                                           std::vector<std::string> charged, std::string pending) {
    for (;;) {
        auto r = co_await ctx.race(ctx.wait<provider_event>(std::string(charge_event_path)),
                                   ctx.timer_at(until, name));
        if (r.index() == 1) co_return std::nullopt;
        const auto& event = r.get<0>();
        bool ours = std::find(charged.begin(), charged.end(), event.charge) != charged.end();
        if (!ours) continue;
        if (event.type == "charge.succeeded") co_return event.charge;
        if (event.charge == pending &&
            (event.type == "charge.declined" || event.type == "charge.failed"))
            co_return std::nullopt;
    }
}

}  // namespace

durable<invoice_outcome> bill(context& ctx, keel::ref<subscription> sub, std::int64_t period,
                              invoice_book& invoices, subscription_book& subs, report_book& reports,
                              payment_provider& provider, terms& billing_terms) {
    keel::ref<invoice> ref(invoice_id(sub.id(), period));
    auto read = [&]() -> asio::awaitable<invoice_terms> {
        auto inv = co_await invoices.repository().get(ref);
        if (!inv) throw std::runtime_error(inv.error().what());
        if (!*inv) throw std::runtime_error("invoice " + ref.id() + " does not exist");
        auto s = co_await subs.repository().get(sub);
        if (!s) throw std::runtime_error(s.error().what());
        if (!*s) throw std::runtime_error("subscription " + sub.id() + " does not exist");
        invoice_terms t{.customer = (*inv)->customer,
                        .card = (*s)->card,
                        .amount = (*inv)->amount,
                        .dunning_ms = {}};
        for (auto d : billing_terms.dunning) t.dunning_ms.push_back(millis(d));
        co_return t;
    };
    auto charged_terms = co_await ctx.run("read invoice", read);
    auto& book = invoices.repository();

    const int attempts = 1 + static_cast<int>(charged_terms.dunning_ms.size());
    std::vector<std::string> charged;
    std::optional<std::string> paid_by;
    int attempt = 1;
    for (;; ++attempt) {
        if (attempt > 1) {  // the dunning wait; a late webhook of a pending charge ends it
            auto now = co_await ctx.now();
            auto wait = std::chrono::milliseconds(charged_terms.dunning_ms[attempt - 2]);
            auto name = fmt::format("dunning {}", attempt - 1);
            paid_by = co_await settle(ctx, now + wait, name, charged, std::string());
            if (paid_by) break;
        }
        charge_request request{
            .card = charged_terms.card, .amount = charged_terms.amount, .reference = ref.id()};
        auto step = fmt::format("charge {}", attempt);
        auto result = co_await provider.charge(ctx, step, request);
        if (!result.id.empty()) charged.push_back(result.id);
        record_charge made{attempt, result.id};
        auto record = fmt::format("record charge {}", attempt);
        co_await ctx.update(record, book, ref, made);
        if (result.status == "succeeded") {
            paid_by = result.id;
            break;
        }
        if (result.status == "pending") {
            auto now = co_await ctx.now();
            auto name = fmt::format("pending {}", attempt);
            paid_by = co_await settle(ctx, now + pending_deadline, name, charged, result.id);
            if (paid_by) break;
        }
        if (attempt == attempts) break;
    }

    if (!paid_by) {
        mark_failed failed;
        co_await ctx.update("mark failed", book, ref, failed);
        co_return invoice_outcome{
            .status = "failed", .amount = charged_terms.amount, .attempts = attempt, .paid_at = {}};
    }
    auto at = co_await ctx.now();
    auto at_text = keel::format_rfc3339(at);
    mark_paid paid{at_text};
    co_await ctx.update("mark paid", book, ref, paid);
    add_paid entry{.date = utc_date(at),
                   .paid = {.invoice = ref.id(), .amount = charged_terms.amount, .at = at_text}};
    keel::ref<ledger> day(utc_date(at));
    co_await ctx.update("ledger", reports.ledgers(), day, entry);
    co_return invoice_outcome{
        .status = "paid", .amount = charged_terms.amount, .attempts = attempt, .paid_at = at_text};
}

// ---- the subscription ----

namespace {

// What a subscription runs with, read once and journaled.
struct subscription_setup {
    std::string customer;
    std::string plan;
    std::int64_t trial_ms = 0;
    std::int64_t period_ms = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(subscription_setup, customer, plan, trial_ms, period_ms)
};

// One subscription's run: its state, the waits that answer requests, the answers.
class subscription_run {
  public:
    subscription_run(context& ctx, keel::ref<subscription> sub, invoice_book& invoices,
                     const subscription_setup& setup, keel::time_point start)
        : ctx_(ctx),
          sub_(std::move(sub)),
          invoices_(invoices),
          customer_(setup.customer),
          plan_(setup.plan),
          trial_(std::chrono::milliseconds(setup.trial_ms)),
          length_(std::chrono::milliseconds(setup.period_ms)),
          start_(start),
          status_(trial_.count() > 0 ? "trialing" : "active") {}

    durable<subscription_end> run() {
        next_charge_ = start_ + trial_;
        publish();
        if (trial_.count() > 0) {
            bool reached = co_await wait_until(start_ + trial_, "trial end");
            if (!reached) co_return ended_;
        }
        for (std::int64_t n = 1;; ++n) {
            bool billed = co_await bill_period(n);
            if (!billed) co_return ended_;
            auto end_name = fmt::format("period {} end", n);
            bool reached = co_await wait_until(period_end_, end_name);
            if (!reached) co_return ended_;
            if (status_ == "past_due") {
                status_ = "cancelled";
                ended_ = {.status = "cancelled", .reason = "unpaid", .refund = 0, .period = n};
                publish();
                co_return ended_;
            }
        }
    }

  private:
    // Opens period n's invoice, starts its process and waits for it; false when a cancel
    // ended the subscription meanwhile.
    durable<bool> bill_period(std::int64_t n) {
        period_ = n;
        period_start_ = start_ + trial_ + (n - 1) * length_;
        period_end_ = period_start_ + length_;
        if (!next_plan_.empty()) plan_ = std::exchange(next_plan_, std::string());
        current_paid_ = false;
        auto amount = plan_price(plan_).value_or(0);
        auto id = invoice_id(sub_.id(), n);
        open_invoice fresh{invoice{.id = id,
                                   .subscription = sub_.id(),
                                   .customer = customer_,
                                   .period = n,
                                   .amount = amount,
                                   .status = "open",
                                   .attempts = 0,
                                   .charges = {},
                                   .paid_at = {}}};
        keel::ref<invoice> ref(id);
        auto open_name = fmt::format("open invoice {}", n);
        co_await ctx_.update(open_name, invoices_.repository(), ref, fresh);
        keel::process::child_options on_queue{.on_queue = &charges, .partition = customer_};
        auto child = co_await ctx_.start(on_queue, invoicing, sub_, n);
        open_invoice_ = id;
        next_charge_ = period_end_;
        publish();

        for (;;) {
            std::optional<invoice_outcome> outcome;
            std::optional<keel::process::request> asked;
            bool to_cancel = false;
            try {
                auto r =
                    co_await ctx_.race(ctx_.join(child), ctx_.receive(std::string(cancel_path)),
                                       ctx_.receive(std::string(plan_path)));
                if (r.index() == 0) {
                    outcome = r.get<0>();
                } else {
                    to_cancel = r.index() == 1;
                    asked = to_cancel ? r.get<1>() : r.get<2>();
                }
            } catch (const keel::process::child_failed& e) {  // failed or cancelled
                outcome = invoice_outcome{
                    .status = "failed", .amount = amount, .attempts = 0, .paid_at = {}};
            }
            if (asked) {
                co_await answer(*asked, to_cancel);
                if (cancelled()) co_return false;
                continue;
            }
            open_invoice_.reset();
            if (outcome->status == "paid") {
                status_ = "active";
                current_paid_ = true;
                paid_amount_ = outcome->amount;
            } else {
                status_ = "past_due";
            }
            publish();
            co_return true;
        }
    }

    // Waits until `at`, answering requests; false when a cancel ended the subscription.
    durable<bool> wait_until(keel::time_point at, std::string name) {
        for (;;) {
            auto r =
                co_await ctx_.race(ctx_.timer_at(at, name), ctx_.receive(std::string(cancel_path)),
                                   ctx_.receive(std::string(plan_path)));
            if (r.index() == 0) co_return true;
            bool to_cancel = r.index() == 1;
            keel::process::request asked = to_cancel ? r.get<1>() : r.get<2>();
            co_await answer(asked, to_cancel);
            if (cancelled()) co_return false;
        }
    }

    durable<void> answer(keel::process::request req, bool to_cancel) {
        if (to_cancel)
            co_await cancel(std::move(req));
        else
            co_await change_plan(std::move(req));
    }

    durable<void> cancel(keel::process::request req) {
        std::int64_t refund = 0;
        if (current_paid_) {
            auto now = co_await ctx_.now();
            refund = prorate(paid_amount_, period_end_ - now, length_);
        }
        if (open_invoice_) {
            keel::ref<invoice> ref(*open_invoice_);
            void_invoice unpaid;
            co_await ctx_.update("void invoice", invoices_.repository(), ref, unpaid);
        }
        nlohmann::json answer = {{"status", "cancelled"}, {"refund", refund}};
        co_await ctx_.reply(req, answer);
        status_ = "cancelled";
        ended_ = {.status = "cancelled", .reason = "customer", .refund = refund, .period = period_};
        publish();
    }

    durable<void> change_plan(keel::process::request req) {
        std::string wanted;
        if (req.body.is_object() && req.body.contains("plan") && req.body["plan"].is_string())
            wanted = req.body["plan"].get<std::string>();
        const auto& upcoming = next_plan_.empty() ? plan_ : next_plan_;
        if (!plan_price(wanted)) {
            auto why = "there is no plan '" + wanted + "'";
            co_await ctx_.refuse(req, why);
            co_return;
        }
        if (wanted == upcoming) {
            auto why = fmt::format("subscription {} is on plan {} already", sub_.id(), wanted);
            co_await ctx_.refuse(req, why);
            co_return;
        }
        next_plan_ = wanted == plan_ ? std::string() : wanted;
        nlohmann::json answer = {{"plan", wanted}, {"effective_period", period_ + 1}};
        co_await ctx_.reply(req, answer);
        publish();
    }

    bool cancelled() const { return status_ == "cancelled"; }

    void publish() {
        nlohmann::json state = {
            {"plan", plan_},
            {"next_plan", next_plan_.empty() ? nlohmann::json() : nlohmann::json(next_plan_)},
            {"period", period_},
            {"status", status_},
            {"next_charge", cancelled() || status_ == "past_due"
                                ? nlohmann::json()
                                : nlohmann::json(keel::format_rfc3339(next_charge_))}};
        ctx_.publish("subscription", state);
    }

    context& ctx_;
    keel::ref<subscription> sub_;
    invoice_book& invoices_;
    std::string customer_;
    std::string plan_;
    std::string next_plan_;  // from the next period on; empty: no change
    keel::duration trial_;
    keel::duration length_;
    keel::time_point start_;
    std::string status_;
    std::int64_t period_ = 0;  // 0: the trial
    keel::time_point period_start_{};
    keel::time_point period_end_{};
    keel::time_point next_charge_{};
    bool current_paid_ = false;
    std::int64_t paid_amount_ = 0;
    std::optional<std::string> open_invoice_;  // the invoice whose process runs
    subscription_end ended_;
};

}  // namespace

durable<subscription_end> subscribe(context& ctx, keel::ref<subscription> sub,
                                    subscription_book& subs, invoice_book& invoices,
                                    terms& billing_terms) {
    auto read = [&]() -> asio::awaitable<subscription_setup> {
        auto s = co_await subs.repository().get(sub);
        if (!s) throw std::runtime_error(s.error().what());
        if (!*s) throw std::runtime_error("subscription " + sub.id() + " does not exist");
        co_return subscription_setup{.customer = (*s)->customer,
                                     .plan = (*s)->plan,
                                     .trial_ms = millis(billing_terms.trial),
                                     .period_ms = millis(billing_terms.period)};
    };
    auto setup = co_await ctx.run("read subscription", read);
    auto start = co_await ctx.now();
    subscription_run flow(ctx, sub, invoices, setup, start);
    co_return co_await flow.run();
}

// ---- the daily report ----

durable<report> report_day(context& ctx, std::string tick, report_book& reports) {
    auto at = tick_time(tick);
    auto date = utc_date(at);
    auto at_text = keel::format_rfc3339(at);
    auto read = [&]() -> asio::awaitable<report> {
        keel::ref<ledger> day(date);
        auto found = co_await reports.ledgers().get(day);
        if (!found) throw std::runtime_error(found.error().what());
        report figures{.date = date, .paid_invoices = 0, .revenue = 0, .at = at_text};
        if (*found)
            for (const auto& p : (*found)->paid)
                if (p.at <= at_text) {
                    ++figures.paid_invoices;
                    figures.revenue += p.amount;
                }
        co_return figures;
    };
    auto figures = co_await ctx.run("read ledger", read);
    put_report write{figures};
    keel::ref<report> ref(date);
    co_await ctx.update("write report", reports.reports(), ref, write);
    co_return figures;
}

}  // namespace billing
