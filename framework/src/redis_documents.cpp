#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/framework/log.hpp>
#include <keel/framework/redis_documents.hpp>
#include <mutex>
#include <unordered_map>

#include "recent_documents.hpp"

namespace keel {
namespace {

// KEYS: doc, lock, fence. ARGV: ttl ms. Returns {token, document|false} or {0}.
const redis::script acquire_script(R"lua(
if redis.call('EXISTS', KEYS[2]) == 1 then return {0} end
local token = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[2], token, 'PX', ARGV[1])
return {token, redis.call('GET', KEYS[1])}
)lua");

// KEYS: doc, lock. ARGV: token, document.
const redis::script save_script(R"lua(
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
)lua");

// KEYS: doc, lock. ARGV: token, document. Saves and gives the lock up.
const redis::script save_release_script(R"lua(
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2])
return 1
)lua");

// KEYS: doc, lock. ARGV: '1' and the expected document, or '0' and '' for none; the new
// document. Returns 1 (written), 2 (a lease is held) or, when the document is not as
// expected, {0, the document|false}.
const redis::script put_if_script(R"lua(
if redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
local current = redis.call('GET', KEYS[1])
if (ARGV[1] == '1' and current ~= ARGV[2]) or (ARGV[1] == '0' and current) then
  return {0, current}
end
redis.call('SET', KEYS[1], ARGV[3])
return 1
)lua");

// KEYS: lock. ARGV: token, ttl ms (renew) / token (release).
const redis::script renew_script(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
)lua");

const redis::script release_script(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
)lua");

model_error unavailable(const redis::error& e) {
    return model_error{model_error::code::unavailable, "entity store: " + e.what()};
}

// After a write that must survive a failover (connection_options::wait_replicas).
// `written`: the write's reply (the WAIT must go out on the socket the write went out on).
asio::awaitable<expected<void, model_error>> replicated(redis::connection& redis,
                                                        std::string_view key,
                                                        const redis::reply& written) {
    auto r = co_await redis.replicate(key, written);
    if (!r) co_return unexpected(unavailable(r.error()));
    co_return expected<void, model_error>{};
}

}  // namespace

// The locks this process holds, and its coroutines waiting for them: a waiter tries again
// the moment a lease here is given up, and for a lock held here waits a little for that
// before asking Redis. (A holder elsewhere is only seen by polling.)
class redis_documents::local_locks {
  public:
    struct waiter {
        explicit waiter(asio::any_io_executor ex) : timer(std::move(ex)) {}
        asio::steady_timer timer;  // on the waiting coroutine's executor
        bool woken = false;        // guarded by the mutex
    };

    std::shared_ptr<waiter> enlist(const std::string& lock_key, asio::any_io_executor ex) {
        auto w = std::make_shared<waiter>(std::move(ex));
        std::lock_guard lock(mutex_);
        waiting_[lock_key].push_back(w);
        return w;
    }
    void leave(const std::string& lock_key, const std::shared_ptr<waiter>& w) {
        std::lock_guard lock(mutex_);
        auto it = waiting_.find(lock_key);
        if (it == waiting_.end()) return;
        std::erase(it->second, w);
        if (it->second.empty()) waiting_.erase(it);
    }
    // Whether the lock was given up here since the last call (and forgets it).
    bool take_woken(waiter& w) {
        std::lock_guard lock(mutex_);
        return std::exchange(w.woken, false);
    }
    bool held_here(const std::string& lock_key) {
        std::lock_guard lock(mutex_);
        return held_.contains(lock_key);
    }
    void hold(const std::string& lock_key) {
        std::lock_guard lock(mutex_);
        ++held_[lock_key];
    }
    // A lease of this process on the lock is over (released, or lost): its waiters try now.
    void given_up(const std::string& lock_key) {
        std::lock_guard lock(mutex_);
        if (auto h = held_.find(lock_key); h != held_.end() && --h->second == 0) held_.erase(h);
        auto it = waiting_.find(lock_key);
        if (it == waiting_.end()) return;
        for (auto& w : it->second) {
            w->woken = true;
            asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
        }
    }

  private:
    std::mutex mutex_;
    std::unordered_map<std::string, int> held_;  // leases per lock key (one, unless lost)
    std::unordered_map<std::string, std::vector<std::shared_ptr<waiter>>> waiting_;
};

namespace {

// A held lease: shared by its redis_lease and the coroutine renewing it.
struct lease_state {
    lease_state(redis::connection& r, std::shared_ptr<redis_documents::local_locks> w,
                std::string doc, std::string lock, std::uint64_t t, std::string what)
        : redis(r),
          locks(std::move(w)),
          doc_key(std::move(doc)),
          key(std::move(lock)),
          token(t),
          entity(std::move(what)),
          timer(r.get_executor()) {
        locks->hold(key);
    }
    ~lease_state() { let_go(); }  // whatever ends it

    redis::connection& redis;
    std::shared_ptr<redis_documents::local_locks> locks;
    std::string doc_key;
    std::string key;
    std::uint64_t token;
    std::string entity;        // "order o-1", for messages
    asio::steady_timer timer;  // paces renewals; only touched on the connection's executor
    std::atomic<bool> lost{false};
    std::atomic<bool> released{false};
    std::atomic<bool> over{false};

    // The lease is over for this process (given up, or lost): its waiters here try now.
    void let_go() {
        if (!over.exchange(true)) locks->given_up(key);
    }
};

// Renews the lease every ttl / 3 until it is released or lost. A renewal that fails
// because Redis is unreachable is retried; the lease counts as lost once ttl has passed
// since the last successful renewal, which is when Redis lets it expire.
asio::awaitable<void> keep_alive(std::shared_ptr<lease_state> lease,
                                 std::chrono::milliseconds ttl) {
    auto last_renewed = std::chrono::steady_clock::now();
    std::vector<std::string> keys{lease->key};
    std::vector<std::string> args{std::to_string(lease->token), std::to_string(ttl.count())};
    while (!lease->released) {
        lease->timer.expires_after(ttl / 3);
        boost::system::error_code ec;
        co_await lease->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (lease->released) co_return;
        auto r = co_await lease->redis.eval(renew_script, keys, args, ttl / 3);
        if (r && r->integer() == 1) {
            last_renewed = std::chrono::steady_clock::now();
        } else if (r || std::chrono::steady_clock::now() - last_renewed >= ttl) {
            lease->lost = true;
            log::logger("repository").warn("lease on {} lost", lease->entity);
            lease->let_go();
            co_return;
        }
    }
}

// Deletes the lock if it still holds `token`, then runs `after`. The connection outlives its
// leases.
template <class After>
asio::awaitable<void> give_back(redis::connection& redis, std::string lock_key, std::uint64_t token,
                                std::string entity, After after) {
    std::vector<std::string> keys{std::move(lock_key)};
    std::vector<std::string> args{std::to_string(token)};
    auto r = co_await redis.eval(release_script, keys, args);
    if (!r)
        log::logger("repository")
            .warn("releasing {} failed ({}); it expires by itself", entity, r.error().what());
    after();
}

// Waits for the backoff (at most until the deadline; then doubles it) or until this process
// gives the lock up.
asio::awaitable<void> pause_until_woken(redis_documents::local_locks& locks,
                                        redis_documents::local_locks::waiter& me,
                                        std::chrono::steady_clock::time_point deadline,
                                        std::chrono::milliseconds& backoff) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    me.timer.expires_after(std::clamp(left, std::chrono::milliseconds(0), backoff));
    boost::system::error_code ec;
    co_await me.timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
    locks.take_woken(me);
}

class redis_lease final : public document_lease {
  public:
    explicit redis_lease(std::shared_ptr<lease_state> state) : state_(std::move(state)) {}
    ~redis_lease() override { release(); }

    std::uint64_t token() const noexcept override { return state_->token; }
    bool lost() const noexcept override { return state_->lost; }

    asio::awaitable<expected<void, model_error>> save(std::string json) override {
        if (state_->released || state_->lost)
            co_return unexpected(model_error::lock_lost_on(state_->entity));
        co_return co_await write(save_script, std::move(json));
    }

    asio::awaitable<expected<void, model_error>> save_and_release(std::string json) override {
        if (state_->lost || state_->released.exchange(true)) {
            release();
            co_return unexpected(model_error::lock_lost_on(state_->entity));
        }
        stop_renewing();
        auto saved = co_await write(save_release_script, std::move(json));
        state_->let_go();
        co_return saved;
    }

    void release() noexcept override {
        if (state_->released.exchange(true)) return;
        stop_renewing();
        if (state_->lost)
            state_->let_go();
        else
            asio::co_spawn(state_->redis.get_executor(),
                           give_back(state_->redis, state_->key, state_->token, state_->entity,
                                     [lease = state_] { lease->let_go(); }),
                           asio::detached);
    }

  private:
    void stop_renewing() noexcept {
        asio::post(state_->redis.get_executor(), [lease = state_] { lease->timer.cancel(); });
    }

    // The document written with the lease's token by `script` (save, or save and release).
    asio::awaitable<expected<void, model_error>> write(const redis::script& script,
                                                       std::string json) {
        auto& lease = *state_;
        std::vector<std::string> keys{lease.doc_key, lease.key};
        std::vector<std::string> args{std::to_string(lease.token), std::move(json)};
        auto r = co_await lease.redis.eval(script, keys, args);
        if (!r) co_return unexpected(unavailable(r.error()));
        if (r->integer() != 1) {
            lease.lost = true;
            co_return unexpected(model_error::lock_lost_on(lease.entity));
        }
        co_return co_await replicated(lease.redis, lease.doc_key, *r);
    }

    std::shared_ptr<lease_state> state_;
};

}  // namespace

redis_documents::redis_documents(redis::connection& redis, repository_options options)
    : redis_(redis),
      options_(std::move(options)),
      locks_(std::make_shared<local_locks>()),
      recent_(std::make_unique<recent_documents>(options_.recent_bytes)) {
    for (const auto* s : {&acquire_script, &save_script, &save_release_script, &put_if_script,
                          &renew_script, &release_script})
        redis_.add_script(*s);
}

redis_documents::~redis_documents() = default;

std::string redis_documents::key(std::string_view model, std::string_view id,
                                 std::string_view suffix) const {
    std::string out;  // "<prefix>:{<model>:<id>}:<suffix>"
    out.reserve(options_.prefix.size() + model.size() + id.size() + suffix.size() + 5);
    out.append(options_.prefix).append(":{").append(model).append(":").append(id);
    out.append("}:").append(suffix);
    return out;
}

std::optional<document_address> redis_documents::address(std::string_view model,
                                                         std::string_view id) const {
    return document_address{&redis_, key(model, id, "doc"), key(model, id, "lock")};
}

void redis_documents::written_elsewhere(std::string_view model, std::string_view id,
                                        std::optional<std::string> text) {
    auto doc = key(model, id, "doc");
    if (text)
        recent_->remember(doc, std::move(*text));
    else
        recent_->forget(doc);
}

asio::awaitable<expected<std::optional<std::string>, model_error>> redis_documents::get(
    std::string model, std::string id) {
    auto r = co_await redis_.exec("GET", key(model, id, "doc"));
    if (!r) co_return unexpected(unavailable(r.error()));
    if (r->is_nil()) co_return std::optional<std::string>{};
    co_return std::optional<std::string>(r->as_string().value());
}

asio::awaitable<expected<std::optional<std::string>, model_error>> redis_documents::read_for_update(
    std::string model, std::string id) {
    auto doc = key(model, id, "doc");
    if (auto known = recent_->find(doc)) co_return std::move(known);
    auto read = co_await get(std::move(model), std::move(id));
    if (read && *read) recent_->remember(doc, **read);
    co_return read;
}

asio::awaitable<expected<void, model_error>> redis_documents::put(std::string model, std::string id,
                                                                  std::string json) {
    auto doc = key(model, id, "doc");
    recent_->forget(doc);
    auto r = co_await redis_.exec("SET", doc, json);
    if (!r) co_return unexpected(unavailable(r.error()));
    if (auto done = co_await replicated(redis_, doc, *r); !done)
        co_return unexpected(std::move(done).error());
    recent_->remember(doc, std::move(json));
    co_return expected<void, model_error>{};
}

asio::awaitable<expected<bool, model_error>> redis_documents::remove(std::string model,
                                                                     std::string id) {
    auto doc = key(model, id, "doc");
    recent_->forget(doc);
    auto r = co_await redis_.exec("DEL", doc);
    if (!r) co_return unexpected(unavailable(r.error()));
    if (auto done = co_await replicated(redis_, doc, *r); !done)
        co_return unexpected(std::move(done).error());
    co_return r->integer().value_or(0) > 0;
}

asio::awaitable<expected<documents::put_if_result, model_error>> redis_documents::put_if(
    std::string model, std::string id, std::optional<std::string> expected, std::string json) {
    std::vector<std::string> keys{key(model, id, "doc"), key(model, id, "lock")};
    std::vector<std::string> args{expected ? "1" : "0", std::move(expected).value_or(""),
                                  std::move(json)};
    // Whatever the outcome, what was remembered may be wrong from now on until it is known.
    recent_->forget(keys[0]);
    auto r = co_await redis_.eval(put_if_script, keys, args);
    if (!r) co_return unexpected(unavailable(r.error()));
    if (auto e = r->elements(); e.size() == 2 && e[0].integer() == 0) {
        if (auto current = e[1].text()) recent_->remember(keys[0], std::string(*current));
        co_return put_if_result::changed;
    }
    auto outcome = r->integer().value_or(-1);
    if (outcome == 2) co_return put_if_result::locked;
    if (outcome != 1)
        co_return unexpected(model_error{model_error::code::unavailable,
                                         "entity store: unexpected answer to a conditional write"});
    if (auto done = co_await replicated(redis_, keys[0], *r); !done)
        co_return unexpected(std::move(done).error());
    recent_->remember(keys[0], std::move(args[2]));
    co_return put_if_result::written;
}

asio::awaitable<expected<documents::acquired, model_error>> redis_documents::lock(
    std::string model, std::string id, std::chrono::milliseconds wait) {
    std::vector<std::string> keys{key(model, id, "doc"), key(model, id, "lock"),
                                  key(model, id, "fence")};
    std::vector<std::string> args{std::to_string(options_.lock_ttl.count())};
    auto deadline = std::chrono::steady_clock::now() + wait;
    auto backoff = std::chrono::milliseconds(2);
    // Enlisted before the first try, so that a release in between is not missed.
    auto me = locks_->enlist(keys[1], co_await asio::this_coro::executor);
    struct leave_on_exit {
        local_locks& all;
        const std::string& key;
        const std::shared_ptr<local_locks::waiter>& me;
        ~leave_on_exit() { all.leave(key, me); }
    } leave{*locks_, keys[1], me};
    if (locks_->held_here(keys[1])) {
        // Held by this process: wait a little for it to be given up before asking Redis.
        auto first_look = std::chrono::milliseconds(10);
        co_await pause_until_woken(*locks_, *me, deadline, first_look);
    }
    recent_->forget(keys[0]);  // its holder will write what this process does not see
    for (;;) {
        auto r = co_await redis_.eval(acquire_script, keys, args);
        if (!r) co_return unexpected(unavailable(r.error()));
        auto e = r->elements();
        if (auto token = e[0].integer(); token && *token > 0) {
            auto lease =
                std::make_shared<lease_state>(redis_, locks_, keys[0], keys[1],
                                              static_cast<std::uint64_t>(*token), model + " " + id);
            // The token must survive a failover, or a later holder could be given it again.
            if (auto done = co_await replicated(redis_, keys[0], *r); !done) {
                asio::co_spawn(redis_.get_executor(),
                               give_back(redis_, keys[1], lease->token, lease->entity,
                                         [lease] { lease->let_go(); }),
                               asio::detached);
                co_return unexpected(std::move(done).error());
            }
            asio::co_spawn(redis_.get_executor(), keep_alive(lease, options_.lock_ttl),
                           asio::detached);
            std::optional<std::string> doc;
            if (e.size() > 1 && !e[1].is_nil()) doc = std::string(*e[1].text());
            co_return acquired{std::make_unique<redis_lease>(std::move(lease)), std::move(doc)};
        }
        auto now = std::chrono::steady_clock::now();
        if (now >= deadline)
            co_return unexpected(model_error::lock_timeout_on(model + " " + id, wait));
        if (locks_->take_woken(*me)) continue;  // given up here meanwhile: try at once
        co_await pause_until_woken(*locks_, *me, deadline, backoff);
    }
}

}  // namespace keel
