// Limits on steps: checking a declared limit, and a limited step's attempt, which takes a
// permit from the engine (and so from the store) before it runs and gives it back after.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <keel/process/detail/operations.hpp>
#include <keel/process/detail/runtime.hpp>
#include <keel/process/errors.hpp>
#include <keel/process/limiter.hpp>
#include <stdexcept>

namespace keel::process {

void check(const limit& l) {
    auto bad = [&](std::string_view field, std::string_view why) {
        throw std::invalid_argument(fmt::format("limit '{}': {} {}", l.name, field, why));
    };
    auto plain = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    };
    if (l.name.empty() || l.name.size() > 64 || !std::ranges::all_of(l.name, plain))
        bad("name", "must be 1 to 64 letters, digits, '-', '_' or '.'");
    if (l.rate == 0 && l.concurrency == 0) bad("rate", "or concurrency must be set (above 0)");
    if (l.rate > 0 && l.per < std::chrono::milliseconds(1)) bad("per", "must be 1 ms or more");
    if (l.concurrency > 0 && l.max_hold < std::chrono::milliseconds(1))
        bad("max_hold", "must be 1 ms or more");
}

std::string describe(const limit& l) {
    std::string out = l.name + ":";
    if (l.rate > 0)
        out += fmt::format(" {} per {} ms", l.rate,
                           std::chrono::ceil<std::chrono::milliseconds>(l.per).count());
    if (l.rate > 0 && l.concurrency > 0) out += ",";
    if (l.concurrency > 0) out += fmt::format(" {} at once", l.concurrency);
    return out;
}

namespace detail {

asio::awaitable<nlohmann::json> limited_body::attempt(step_writes& writes) {
    try {
        check(limit_);  // a bad declaration fails the step for good, saying which field
    } catch (const std::invalid_argument& e) {
        throw terminal_error(e.what());
    }
    co_await runtime::take_permit(rt_, limit_, seq_);
    std::exception_ptr failed;
    nlohmann::json value;
    try {
        value = co_await inner_->attempt(writes);
    } catch (...) {
        failed = std::current_exception();
    }
    if (limit_.concurrency > 0) co_await runtime::give_permit(rt_, limit_, seq_);
    if (failed) std::rethrow_exception(failed);
    co_return value;
}

asio::awaitable<void> runtime::take_permit(runtime* rt, const limit& l, std::uint64_t seq) {
    if (!rt->calls_)
        throw terminal_error("process " + rt->id() + " cannot take a permit of limit " + l.name +
                             ": it does not run in an engine");
    co_await rt->calls_->take_permit(l, seq);
}

asio::awaitable<void> runtime::give_permit(runtime* rt, const limit& l, std::uint64_t seq) {
    if (rt->calls_) co_await rt->calls_->give_permit(l.name, seq);
}

}  // namespace detail

}  // namespace keel::process
