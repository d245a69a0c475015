#include "domain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <keel/framework/config.hpp>
#include <stdexcept>

namespace billing {

bool same_request(const subscription& a, const subscription& b) {
    return a.id == b.id && a.customer == b.customer && a.plan == b.plan && a.card == b.card;
}

std::string invoice_id(std::string_view subscription, std::int64_t period) {
    return fmt::format("{}-{}", subscription, period);
}

std::optional<std::int64_t> plan_price(std::string_view plan) {
    if (plan == "basic") return 1000;
    if (plan == "pro") return 3000;
    return std::nullopt;
}

std::string utc_date(keel::time_point t) {
    std::chrono::year_month_day day{std::chrono::floor<std::chrono::days>(t)};
    return fmt::format("{:04}-{:02}-{:02}", static_cast<int>(day.year()),
                       static_cast<unsigned>(day.month()), static_cast<unsigned>(day.day()));
}

bool is_date(std::string_view text) {
    if (text.size() != 10 || text[4] != '-' || text[7] != '-') return false;
    auto number = [&](std::size_t at, std::size_t n, int& out) {
        auto end = text.data() + at + n;
        auto [p, ec] = std::from_chars(text.data() + at, end, out);
        return ec == std::errc() && p == end;
    };
    int y = 0, m = 0, d = 0;
    if (!number(0, 4, y) || !number(5, 2, m) || !number(8, 2, d)) return false;
    std::chrono::year_month_day day{std::chrono::year(y), std::chrono::month(m),
                                    std::chrono::day(d)};
    return day.ok();
}

std::vector<keel::duration> parse_dunning(std::string_view list) {
    std::vector<keel::duration> out;
    if (list.empty()) return out;  // no retries: the first decline fails the invoice
    std::size_t start = 0;
    for (;;) {
        auto comma = list.find(',', start);
        auto item = list.substr(start, comma == std::string_view::npos ? comma : comma - start);
        auto wait = keel::config::parse_duration(item);
        if (!wait)
            throw std::invalid_argument(fmt::format(
                "'{}' is not a duration (a list like 1d,3d,5d; units ms, s, m, h, d)", item));
        if (wait->count() <= 0)
            throw std::invalid_argument(fmt::format("'{}': a wait must be longer than 0", item));
        out.push_back(std::chrono::duration_cast<keel::duration>(*wait));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return out;
}

terms terms_of(const settings& s) {
    // --dunning was checked at start (service.cpp): this parse does not throw there.
    return terms{.trial = s.trial, .period = s.period, .dunning = parse_dunning(s.dunning)};
}

namespace {

template <class T>
T& existing(std::optional<T>& x) {
    if (!x) throw std::runtime_error("the " + std::string(T::model_name) + " does not exist");
    return *x;
}

}  // namespace

bool open_invoice::operator()(std::optional<invoice>& i) const {
    if (i) return false;
    i = fresh;
    return true;
}

bool record_charge::operator()(std::optional<invoice>& i) const {
    auto& x = existing(i);
    bool changed = false;
    if (x.attempts < attempt) {
        x.attempts = attempt;
        changed = true;
    }
    if (!charge.empty() &&
        std::find(x.charges.begin(), x.charges.end(), charge) == x.charges.end()) {
        x.charges.push_back(charge);
        changed = true;
    }
    return changed;
}

bool mark_paid::operator()(std::optional<invoice>& i) const {
    auto& x = existing(i);
    if (x.status == "paid") return false;
    x.status = "paid";
    x.paid_at = at;
    return true;
}

bool mark_failed::operator()(std::optional<invoice>& i) const {
    auto& x = existing(i);
    if (x.status != "open") return false;
    x.status = "failed";
    return true;
}

bool void_invoice::operator()(std::optional<invoice>& i) const {
    if (!i || i->status != "open") return false;
    i->status = "void";
    return true;
}

bool add_paid::operator()(std::optional<ledger>& l) const {
    if (!l) l = ledger{.date = date, .paid = {}};
    auto& entries = l->paid;
    bool there = std::any_of(entries.begin(), entries.end(),
                             [&](const paid_invoice& p) { return p.invoice == paid.invoice; });
    if (there) return false;
    entries.push_back(paid);
    return true;
}

bool put_report::operator()(std::optional<billing::report>& r) const {
    if (r && r->at > value.at) return false;  // RFC 3339 UTC texts order as times do
    if (r && r->paid_invoices == value.paid_invoices && r->revenue == value.revenue &&
        r->at == value.at)
        return false;
    r = value;
    return true;
}

}  // namespace billing
