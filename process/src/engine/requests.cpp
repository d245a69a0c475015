// Requests answered by a running instance (engine::ask) and its published state.
//
// An ask runs on the part that owns the instance, where the instance's reply step also runs
// when this worker holds it: that step wakes the asker at once (impl::answered). An answer
// stored by another worker is found by polling the store, from 5 ms doubling to 200 ms,
// which also notices an instance that ended without answering.

#include <fmt/format.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <keel/process/request.hpp>

#include "impl.hpp"

namespace keel::process {

using engine_parts::on_engine;

namespace {

std::string asker_key(std::string_view instance, std::string_view request) {
    std::string key;
    key.reserve(instance.size() + request.size() + 1);
    key.append(instance).append("\n").append(request);
    return key;
}

ask_error ask_failure(ask_error::reason why, const std::string& instance,
                      const std::string& request, std::string message) {
    return ask_error{why, instance, request, std::move(message)};
}

expected<nlohmann::json, ask_error> answer_of(const nlohmann::json& stored,
                                              const std::string& instance,
                                              const std::string& request) {
    if (stored.contains("refused"))
        return unexpected(
            ask_failure(ask_error::reason::refused, instance, request,
                        fmt::format("process instance {} refused request {}: {}", instance, request,
                                    stored["refused"].get<std::string>())));
    return stored.value("value", nlohmann::json());
}

// Registered in impl::askers while it lives.
class asker {
  public:
    asker(engine::impl& part, std::string key) : part_(part), key_(std::move(key)) {
        part_.askers[key_].push_back(&waiter_);
    }
    ~asker() {
        auto it = part_.askers.find(key_);
        if (it == part_.askers.end()) return;
        std::erase(it->second, &waiter_);
        if (it->second.empty()) part_.askers.erase(it);
    }
    asker(const asker&) = delete;
    asker& operator=(const asker&) = delete;

    // Until `until`, or until the answer is stored here.
    asio::awaitable<void> sleep(time_point until) {
        if (waiter_.answered) co_return;
        error_code ec;
        co_await part_.clock.async_wait_until(
            part_.ex, until,
            asio::bind_cancellation_slot(waiter_.wake.slot(),
                                         asio::redirect_error(asio::use_awaitable, ec)));
    }

  private:
    engine::impl& part_;
    std::string key_;
    engine::impl::ask_waiter waiter_;
};

asio::awaitable<expected<nlohmann::json, ask_error>> ask_here(std::shared_ptr<engine::impl> self,
                                                              std::string instance,
                                                              std::string path, nlohmann::json body,
                                                              ask_options options) {
    auto id = options.id;
    if (id.empty())
        id = fmt::format("{}-{:016x}{:016x}", self->opt.worker, self->rng(), self->rng());
    if (auto stored = co_await self->st.answer(instance, id))
        co_return answer_of(*stored, instance, id);
    asker waiting(*self, asker_key(instance, id));
    auto deadline = self->clock.now() + options.timeout;
    auto payload = detail::request_payload(id, std::move(body));
    auto d = co_await self->deliver_to(instance, path, std::move(payload), "request:" + id);
    if (d.result == delivery::outcome::no_instance)
        co_return unexpected(ask_failure(ask_error::reason::not_found, instance, id,
                                         "no process instance " + instance));
    if (d.result == delivery::outcome::finished)
        co_return unexpected(ask_failure(ask_error::reason::final, instance, id,
                                         "process instance " + instance + " is final"));
    duration poll = std::chrono::milliseconds(5);
    for (;;) {
        co_await waiting.sleep(std::min(deadline, self->clock.now() + poll));
        if (auto stored = co_await self->st.answer(instance, id))
            co_return answer_of(*stored, instance, id);
        if (self->clock.now() >= deadline)
            co_return unexpected(ask_failure(
                ask_error::reason::timeout, instance, id,
                fmt::format(
                    "process instance {} did not answer request {} within {} ms", instance, id,
                    std::chrono::ceil<std::chrono::milliseconds>(options.timeout).count())));
        if (self->stopped)
            co_return unexpected(ask_failure(ask_error::reason::timeout, instance, id,
                                             "the engine stopped before an answer came"));
        auto snap = co_await self->st.load(instance, false);
        if (!snap)
            co_return unexpected(ask_failure(ask_error::reason::not_found, instance, id,
                                             "no process instance " + instance));
        if (is_final(snap->status) && !snap->parked) {
            if (auto stored = co_await self->st.answer(instance, id))  // answered as it ended
                co_return answer_of(*stored, instance, id);
            co_return unexpected(ask_failure(
                ask_error::reason::final, instance, id,
                fmt::format("process instance {} ended ({}) without answering request {}", instance,
                            to_string(snap->status), id)));
        }
        poll = std::min<duration>(poll * 2, std::chrono::milliseconds(200));
    }
}

asio::awaitable<std::optional<nlohmann::json>> published_here(std::shared_ptr<engine::impl> self,
                                                              std::string instance,
                                                              std::string name) {
    auto snap = co_await self->st.load(instance, false);
    if (!snap) co_return std::nullopt;
    auto it = snap->published.find(name);
    if (it == snap->published.end()) co_return std::nullopt;
    co_return it->second;
}

}  // namespace

void engine::impl::answered(const std::string& instance, const std::string& request) {
    auto it = askers.find(asker_key(instance, request));
    if (it == askers.end()) return;
    for (auto* w : it->second) {
        w->answered = true;
        w->wake.emit(asio::cancellation_type::all);
    }
}

asio::awaitable<expected<nlohmann::json, ask_error>> engine::ask(std::string instance,
                                                                 std::string path,
                                                                 nlohmann::json body,
                                                                 ask_options options) {
    auto owner = owner_of(instance);
    co_return co_await on_engine(std::move(owner), &ask_here, std::move(instance), std::move(path),
                                 std::move(body), std::move(options));
}

asio::awaitable<std::optional<nlohmann::json>> engine::published(std::string instance,
                                                                 std::string name) {
    auto here = part_for(co_await asio::this_coro::executor);
    co_return co_await on_engine(std::move(here), &published_here, std::move(instance),
                                 std::move(name));
}

}  // namespace keel::process
