#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/append.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cassert>
#include <charconv>
#include <deque>
#include <keel/framework/concurrency/context.hpp>
#include <keel/framework/log.hpp>
#include <keel/framework/redis/connection.hpp>
#include <keel/framework/redis/slot.hpp>
#include <stdexcept>

#include "cluster.hpp"
#include "node.hpp"
#include "refusals.hpp"
#include "reply_reader.hpp"
#include "teardown.hpp"

namespace keel::redis {

using steady = std::chrono::steady_clock;
using boost::system::error_code;

// ---------------------------------------------------------------------------------------
// Encoding: a RESP array of bulk strings, sized first and written once (replies are parsed
// by reply_reader). hiredis's redisFormatCommandArgv did the same with an snprintf per
// argument and a copy, a measured 4% of keel-orders' CPU under load.

namespace {

std::size_t decimal_digits(std::size_t n) noexcept {
    std::size_t d = 1;
    for (; n >= 10; n /= 10) ++d;
    return d;
}

// "<kind><n>\r\n" at `at`; returns the end. The caller sized the buffer.
char* put_length(char* at, char kind, std::size_t n) {
    *at++ = kind;
    at = std::to_chars(at, at + 20, n).ptr;
    *at++ = '\r';
    *at++ = '\n';
    return at;
}

template <class Range>
std::string encode_args(const Range& args) {
    std::size_t size = 3 + decimal_digits(std::size(args));
    for (const auto& a : args) {
        auto n = std::string_view(a).size();
        size += 5 + decimal_digits(n) + n;
    }
    std::string out(size, '\0');
    char* at = put_length(out.data(), '*', std::size(args));
    for (const auto& a : args) {
        std::string_view v(a);
        at = put_length(at, '$', v.size());
        at = std::copy(v.begin(), v.end(), at);
        *at++ = '\r';
        *at++ = '\n';
    }
    assert(at == out.data() + out.size());
    return out;
}

}  // namespace

std::string command::encode(std::span<const std::string_view> args) {
    return encode_args(args);
}

command command::from_args(std::span<const std::string_view> args) {
    command c;
    c.payload_ = encode_args(args);
    return c;
}

command command::from_args(std::span<const std::string> args) {
    command c;
    c.payload_ = encode_args(args);
    return c;
}

namespace detail {

std::string evalsha_to_eval(const std::string& payload, const script& s) {
    // *N\r\n $7\r\nEVALSHA\r\n $40\r\n<sha>\r\n <rest>
    auto header_end = payload.find("\r\n") + 2;
    auto rest = header_end + std::string_view("$7\r\nEVALSHA\r\n$40\r\n").size() + 40 + 2;
    return payload.substr(0, header_end) + fmt::format("$4\r\nEVAL\r\n${}\r\n", s.source().size()) +
           s.source() + "\r\n" + payload.substr(rest);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------

namespace detail {

using namespace asio::experimental::awaitable_operators;
using socket_type = asio::generic::stream_protocol::socket;

// A request from submit() to its reply. Never move-assigned: Boost 1.81's
// any_completion_handler move assignment copies its operand through the converting
// constructor, which wraps the handler in itself without end (a stack overflow once a deque
// shifts a live request). So queues only push, pop and move-construct; a request answered
// early (cancelled, expired) stays in place as a tombstone, its handler moved out.
struct pending {
    pending(std::uint64_t id, std::string payload, connection::handler_type handler,
            steady::time_point deadline, const script* eval_script)
        : id(id),
          payload(std::move(payload)),
          handler(std::move(handler)),
          deadline(deadline),
          eval_script(eval_script) {}
    pending(pending&&) noexcept = default;
    pending& operator=(pending&&) = delete;

    std::uint64_t id = 0;
    std::string payload;
    connection::handler_type handler;
    steady::time_point deadline = steady::time_point::max();
    const script* eval_script = nullptr;  // EVALSHA: resend as EVAL on NOSCRIPT
    bool abandoned = false;               // the caller was answered already; discard the reply
    // replicate()'s WAIT: sent only on this session (session_id_), refused on any other.
    std::uint64_t required_session = 0;
    // The timeout its caller gave it, if longer than silence_timeout: how long the server
    // may legitimately stay silent while it is the oldest request awaiting a reply.
    std::chrono::milliseconds patience{};
};

// Sessions are numbered across every connection of the process: a number names one socket.
std::atomic<std::uint64_t> next_session_id{1};

class connection_impl : public std::enable_shared_from_this<connection_impl>, public pending_owner {
  public:
    connection_impl(asio::any_io_executor ex, connection_options opts, endpoint where,
                    std::shared_ptr<write_refusals> refusals)
        : executor_(std::move(ex)),
          options_(std::move(opts)),
          where_(std::move(where)),
          refusals_(std::move(refusals)),
          socket_(executor_),
          wake_(executor_),
          deadline_timer_(executor_),
          backoff_timer_(executor_),
          health_timer_(executor_),
          silence_timer_(executor_),
          connect_timer_(executor_),
          log_(log::logger("redis").with("redis", where_.display())) {
        deadline_timer_.expires_at(steady::time_point::max());
    }

    void start() {
        auto self = shared_from_this();
        drop_pending_at_shutdown(executor_, self);
        asio::co_spawn(executor_, run(), [self](std::exception_ptr e) { self->on_loop_end(e); });
        asio::co_spawn(executor_, expire_loop(),
                       [self](std::exception_ptr e) { self->on_loop_end(e); });
    }

    void drop_pending() override {
        auto queued = std::move(queued_);
        auto inflight = std::move(inflight_);
        queued_.clear();
        inflight_.clear();
        tombstones_ = 0;
        count_outstanding();
    }

    // Called on any thread; hops onto the connection's executor.
    void submit(std::string payload, std::chrono::milliseconds timeout, const script* s,
                connection::handler_type handler, std::uint64_t session = 0) {
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto deadline = steady::time_point::max();
        auto patience = timeout;
        if (timeout == std::chrono::milliseconds::zero()) timeout = options_.request_timeout;
        if (timeout > std::chrono::milliseconds::zero()) deadline = steady::now() + timeout;
        auto id = next_id_.fetch_add(1, std::memory_order_relaxed);
        if (slot.is_connected()) {
            slot.assign([weak = weak_from_this(), id](asio::cancellation_type) {
                // Inline when emitted on the connection's thread: a request still queued is
                // then removed before the writer can send it.
                if (auto self = weak.lock())
                    asio::dispatch(self->executor_, [self, id] { self->cancel(id); });
            });
        }
        pending p(id, std::move(payload), std::move(handler), deadline, s);
        p.required_session = session;
        p.patience = patience;
        asio::dispatch(executor_, [self = shared_from_this(), p = std::move(p)]() mutable {
            self->enqueue(std::move(p));
        });
    }

    void add_script(const script& s) {
        asio::dispatch(executor_, [self = shared_from_this(), s] {
            self->scripts_.push_back(s);
            if (self->connected_) {
                // Load it now too; later connects load it during the handshake.
                self->enqueue(pending(
                    self->next_id_++, command("SCRIPT", "LOAD", s.source()).payload(),
                    self->internal_handler([](result) {}), steady::time_point::max(), nullptr));
            }
        });
    }

    void close() {
        asio::dispatch(executor_, [self = shared_from_this()] {
            if (self->closed_) return;
            self->closed_ = true;
            error_code ignored;
            self->socket_.close(ignored);
            self->wake_.cancel();
            self->deadline_timer_.cancel();
            self->backoff_timer_.cancel();
            self->health_timer_.cancel();
            self->silence_timer_.cancel();
            self->connect_timer_.cancel();
            self->fail_all(self->queued_, errc::closed, "the connection was closed");
            self->fail_all(self->inflight_, errc::closed, "the connection was closed");
        });
    }

    // Cluster node: see node.hpp. Set before start().
    void enable_fail_fast() { fail_fast_ = true; }

    // On executor_: queues a request of the cluster router, ASKING first when asked.
    std::uint64_t send_direct(std::string payload, steady::time_point deadline,
                              connection::handler_type handler, bool asking,
                              std::chrono::milliseconds patience, std::uint64_t session) {
        if (asking)
            enqueue(pending(next_id_++, std::string(asking_payload), {}, deadline, nullptr));
        auto id = next_id_++;
        pending p(id, std::move(payload), std::move(handler), deadline, nullptr);
        p.patience = patience;
        p.required_session = session;
        enqueue(std::move(p));
        return id;
    }

    // On executor_: answers a request with errc::cancelled; one still queued is not written.
    void cancel(std::uint64_t id) {
        error why{errc::cancelled, "request cancelled"};
        for (std::size_t i = 0; i < queued_.size(); ++i) {
            auto& p = queued_[i];
            if (p.id != id || p.abandoned) continue;
            // A cluster node's ASKING sent alone would apply to whatever request came next.
            if (fail_fast_ && i > 0 && !queued_[i - 1].abandoned &&
                queued_[i - 1].payload == asking_payload)
                answer_queued(queued_[i - 1], why);
            answer_queued(p, std::move(why));
            return drop_tombstones();
        }
        for (auto& p : inflight_) {
            if (p.id == id && !p.abandoned) {
                p.abandoned = true;
                return complete(std::move(p), unexpected(std::move(why)));
            }
        }
    }

    bool connected() const { return connected_flag_.load(); }
    std::uint64_t session_id() const { return session_id_; }  // on the executor
    connection_stats stats() const {
        return {requests_.load(), writes_.load(),      replies_.load(),
                connects_.load(), outstanding_.load(), connected()};
    }
    const endpoint& where() const { return where_; }
    const asio::any_io_executor& executor() const { return executor_; }

  private:
    // --- request bookkeeping (on executor_) ---------------------------------------------

    void enqueue(pending p) {
        requests_.fetch_add(1, std::memory_order_relaxed);
        if (closed_)
            return complete(std::move(p),
                            unexpected(error{errc::closed, "the connection was closed"}));
        if (!connected_ && fail_fast_ && !last_error_.empty())
            return complete(std::move(p), unexpected(unsent_error()));
        if (p.deadline < armed_deadline_) arm_deadline(p.deadline);
        queued_.push_back(std::move(p));
        count_outstanding();
        if (queued_.size() == 1) wake_.cancel();
    }

    // Answers a request that was not written yet; it stays queued as a tombstone that the
    // writer skips.
    void answer_queued(pending& p, error why) {
        p.abandoned = true;
        p.payload = std::string();
        ++tombstones_;
        complete(std::move(p), unexpected(std::move(why)));
    }

    void drop_tombstones() {
        while (!queued_.empty() && queued_.front().abandoned) pop_queued();
        while (!queued_.empty() && queued_.back().abandoned) {
            queued_.pop_back();
            --tombstones_;
        }
        count_outstanding();
    }

    void pop_queued() {
        if (queued_.front().abandoned) --tombstones_;
        queued_.pop_front();
    }

    // Never runs the caller inline: the post goes through the connection's executor, then
    // the handler's own associated executor.
    void complete(pending&& p, result r) {
        if (!p.handler) return;
        asio::post(executor_, asio::append(std::move(p.handler), std::move(r)));
    }

    // A completion handler for the connection's own requests (script loads, health PINGs).
    connection::handler_type internal_handler(std::function<void(result)> fn) {
        return connection::handler_type(asio::bind_executor(executor_, std::move(fn)));
    }

    void fail_all(std::deque<pending>& ops, errc code, const std::string& why) {
        auto taken = std::move(ops);
        ops.clear();
        if (&ops == &queued_) tombstones_ = 0;
        count_outstanding();
        for (auto& p : taken) {
            if (!p.abandoned) complete(std::move(p), unexpected(error{code, why}));
        }
    }

    void arm_deadline(steady::time_point when) {
        armed_deadline_ = when;
        deadline_timer_.expires_at(when);  // wakes expire_loop, which re-reads the expiry
    }

    // Fails requests whose deadline passed; one timer serves every request.
    asio::awaitable<void> expire_loop() {
        while (!closed_) {
            error_code ec;
            co_await deadline_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            if (closed_) break;
            if (ec && deadline_timer_.expiry() > steady::now()) continue;  // re-armed earlier
            auto now = steady::now();
            auto next = steady::time_point::max();
            for (auto& p : queued_) {
                if (p.abandoned) continue;
                if (p.deadline <= now)
                    answer_queued(p, unsent_error());
                else
                    next = std::min(next, p.deadline);
            }
            drop_tombstones();
            for (auto& p : inflight_) {
                if (p.abandoned) continue;
                if (p.deadline <= now) {
                    p.abandoned = true;
                    complete(
                        std::move(p),
                        unexpected(error{errc::timeout,
                                         fmt::format("no reply from {} within the request timeout",
                                                     where_.display())}));
                } else {
                    next = std::min(next, p.deadline);
                }
            }
            count_outstanding();
            armed_deadline_ = next;
            deadline_timer_.expires_at(next);
        }
    }

    error unsent_error() const {
        if (!connected_) {
            return error{errc::not_connected,
                         fmt::format("cannot reach {}: {}", where_.display(),
                                     last_error_.empty() ? "connecting" : last_error_)};
        }
        return error{errc::timeout, fmt::format("request to {} timed out before it could be sent",
                                                where_.display())};
    }

    // --- connection lifecycle ------------------------------------------------------------

    asio::awaitable<void> run() {
        auto backoff = options_.reconnect_min;
        while (!closed_) {
            auto failure = co_await connect_and_handshake();
            if (closed_) break;
            if (failure) {
                if (*failure != last_error_ || !warned_) log_.warn("{}", *failure);
                warned_ = true;
                last_error_ = std::move(*failure);
                if (fail_fast_) fail_all(queued_, errc::not_connected, unsent_error().message);
                error_code ignored;
                socket_.close(ignored);
                backoff_timer_.expires_after(backoff);
                co_await backoff_timer_.async_wait(
                    asio::redirect_error(asio::use_awaitable, ignored));
                backoff = std::min(backoff * 2, options_.reconnect_max);
                continue;
            }
            backoff = options_.reconnect_min;
            if (warned_) log_.info("connected");
            warned_ = false;
            set_connected(true);
            connects_.fetch_add(1, std::memory_order_relaxed);
            session_error_.clear();
            session_id_ = next_session_id.fetch_add(1, std::memory_order_relaxed);
            last_read_ = awaiting_since_ = steady::now();
            co_await (read_loop() || write_loop() || health_loop() || silence_loop());
            session_id_ = 0;
            set_connected(false);
            error_code ignored;
            socket_.close(ignored);
            reader_.reset();
            last_error_ = session_error_.empty() ? "connection closed" : session_error_;
            if (!closed_) {
                log_.warn("connection lost: {}", last_error_);
                warned_ = true;
            }
            fail_all(inflight_, errc::connection_lost,
                     fmt::format("connection to {} lost before the reply arrived ({}); the "
                                 "command may or may not have run",
                                 where_.display(), last_error_));
            if (fail_fast_) fail_all(queued_, errc::not_connected, unsent_error().message);
        }
    }

    void on_loop_end(std::exception_ptr e) {
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            log_.error("redis connection loop failed: {}", ex.what());
        }
    }

    void set_connected(bool up) {
        connected_ = up;
        connected_flag_ = up;
    }

    // Connects and runs AUTH/SELECT/CLIENT SETNAME/SCRIPT LOAD. Returns why it failed.
    asio::awaitable<std::optional<std::string>> connect_and_handshake() {
        error_code ec;
        socket_ = socket_type(executor_);
        reader_.emplace();
        // One deadline covers connect and handshake: when it passes, the socket is closed.
        auto attempt = ++connect_attempt_;
        connect_timed_out_ = false;
        connect_timer_.expires_after(options_.connect_timeout);
        connect_timer_.async_wait([this, self = shared_from_this(), attempt](error_code e) {
            if (e || attempt != connect_attempt_ || connect_timer_.expiry() > steady::now()) return;
            connect_timed_out_ = true;
            error_code ignored;
            socket_.close(ignored);
        });
        struct cancel_timer {
            asio::steady_timer& t;
            ~cancel_timer() { t.cancel(); }
        } guard{connect_timer_};
        auto& timed_out = connect_timed_out_;

        if (where_.kind == endpoint::transport::unix_socket) {
            co_await socket_.async_connect(asio::local::stream_protocol::endpoint(where_.path),
                                           asio::redirect_error(asio::use_awaitable, ec));
        } else {
            asio::ip::tcp::resolver resolver(executor_);
            auto results =
                co_await resolver.async_resolve(where_.host, std::to_string(where_.port),
                                                asio::redirect_error(asio::use_awaitable, ec));
            if (ec) co_return fmt::format("cannot resolve {}: {}", where_.display(), ec.message());
            for (const auto& entry : results) {
                socket_ = socket_type(executor_);
                co_await socket_.async_connect(entry.endpoint(),
                                               asio::redirect_error(asio::use_awaitable, ec));
                if (!ec) break;
            }
            if (!ec) socket_.set_option(asio::ip::tcp::no_delay(true), ec);
        }
        if (timed_out) co_return fmt::format("connect to {} timed out", where_.display());
        if (ec) co_return fmt::format("cannot connect to {}: {}", where_.display(), ec.message());

        std::vector<std::pair<std::string, std::string>> steps;  // what, payload
        if (!where_.password.empty()) {
            steps.emplace_back("AUTH",
                               where_.user.empty()
                                   ? command("AUTH", where_.password).payload()
                                   : command("AUTH", where_.user, where_.password).payload());
        }
        if (where_.db != 0) steps.emplace_back("SELECT", command("SELECT", where_.db).payload());
        if (!options_.client_name.empty())
            steps.emplace_back("CLIENT SETNAME",
                               command("CLIENT", "SETNAME", options_.client_name).payload());
        for (const auto& s : scripts_)
            steps.emplace_back("SCRIPT LOAD", command("SCRIPT", "LOAD", s.source()).payload());
        if (steps.empty()) co_return std::nullopt;

        std::string batch;
        for (const auto& [_, payload] : steps) batch += payload;
        co_await asio::async_write(socket_, asio::buffer(batch),
                                   asio::redirect_error(asio::use_awaitable, ec));
        for (const auto& [what, _] : steps) {
            if (ec) break;
            auto r = co_await read_one(ec);
            if (!ec && r.is_error())
                co_return fmt::format("{} on {} failed: {}", what, where_.display(), *r.text());
        }
        if (timed_out) co_return fmt::format("handshake with {} timed out", where_.display());
        if (ec)
            co_return fmt::format("handshake with {} failed: {}", where_.display(), ec.message());
        co_return std::nullopt;
    }

    // Reads exactly one reply (handshake only; the read loop does the same in bulk).
    asio::awaitable<reply> read_one(error_code& ec) {
        for (;;) {
            auto next = reader_->next();
            if (!next) {
                ec = asio::error::invalid_argument;
                co_return reply{};
            }
            if (*next) co_return std::move(**next);
            auto n = co_await socket_.async_read_some(
                asio::buffer(read_buffer_), asio::redirect_error(asio::use_awaitable, ec));
            if (ec) co_return reply{};
            if (!reader_->feed(std::string_view(read_buffer_.data(), n))) {
                ec = asio::error::no_memory;
                co_return reply{};
            }
        }
    }

    asio::awaitable<void> read_loop() {
        for (;;) {
            error_code ec;
            auto n = co_await socket_.async_read_some(
                asio::buffer(read_buffer_), asio::redirect_error(asio::use_awaitable, ec));
            if (ec)
                co_return end_session(ec == asio::error::eof ? "server closed the connection"
                                                             : ec.message());
            last_read_ = steady::now();
            if (!reader_->feed(std::string_view(read_buffer_.data(), n)))
                co_return end_session("out of memory while parsing");
            read_replies_.clear();
            std::string protocol_error;
            for (;;) {
                auto next = reader_->next();
                if (!next) {
                    protocol_error = "protocol error: " + next.error();
                    break;
                }
                if (!*next) break;
                read_replies_.push_back(std::move(**next));
            }
            auto part = std::max(min_replies_per_part,
                                 (read_replies_.size() + parts_per_read - 1) / parts_per_read);
            for (std::size_t i = 0; i < read_replies_.size(); ++i) {
                if (i > 0 && i % part == 0) {
                    co_await asio::post(executor_, asio::use_awaitable);
                    if (closed_ || !session_error_.empty()) co_return;
                }
                if (inflight_.empty())
                    co_return end_session("protocol error: a reply nobody asked for");
                deliver(std::move(read_replies_[i]));
            }
            if (!protocol_error.empty()) co_return end_session(std::move(protocol_error));
        }
    }

    void deliver(reply r) {
        replies_.fetch_add(1, std::memory_order_relaxed);
        auto p = std::move(inflight_.front());
        inflight_.pop_front();
        count_outstanding();
        if (p.abandoned) return;
        if (r.is_error()) {
            auto text = std::string(*r.text());
            if (p.eval_script && text.starts_with("NOSCRIPT")) {
                // The script cache was flushed: send the source once; EVAL caches it again.
                p.payload = evalsha_to_eval(p.payload, *p.eval_script);
                p.eval_script = nullptr;
                queued_.push_front(std::move(p));
                count_outstanding();
                wake_.cancel();
                return;
            }
            if (auto refusal = write_refusals::of(text))
                if (auto line = refusals_->refused(*refusal, request_name(p.payload), text))
                    log_.warn("{}", *line);
            return complete(std::move(p), unexpected(error{errc::server_error, std::move(text)}));
        }
        if (refusals_->refusing()) [[unlikely]]
            if (auto line = refusals_->succeeded(request_name(p.payload))) log_.info("{}", *line);
        r.set_session(session_id_);
        complete(std::move(p), std::move(r));
    }

    asio::awaitable<void> write_loop() {
        for (;;) {
            while (queued_.empty()) {
                error_code ec;
                wake_.expires_at(steady::time_point::max());
                co_await wake_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
                if (closed_ || !session_error_.empty()) co_return;
            }
            write_buffer_.clear();
            if (inflight_.empty()) awaiting_since_ = steady::now();
            constexpr std::size_t batch_limit = 1 << 20;
            while (!queued_.empty() &&
                   (write_buffer_.empty() || write_buffer_.size() < batch_limit)) {
                auto& next = queued_.front();
                if (next.required_session && next.required_session != session_id_)
                    answer_queued(next, other_session_error());
                if (!next.abandoned) {
                    write_buffer_ += next.payload;
                    inflight_.push_back(std::move(next));
                }
                pop_queued();
            }
            count_outstanding();
            if (write_buffer_.empty()) continue;
            writes_.fetch_add(1, std::memory_order_relaxed);
            error_code ec;
            co_await asio::async_write(socket_, asio::buffer(write_buffer_),
                                       asio::redirect_error(asio::use_awaitable, ec));
            if (ec) co_return end_session(ec.message());
            if (write_buffer_.capacity() > 4 * batch_limit) write_buffer_ = std::string();
        }
    }

    // When idle for `interval` (nothing read, nothing awaited), a PING; no answer within
    // the silence bound (or the request timeout, if shorter) ends the session.
    asio::awaitable<void> health_loop() {
        auto interval = options_.health_check_interval;
        if (interval <= std::chrono::milliseconds::zero()) co_return co_await idle(health_timer_);
        auto wake_at = steady::now() + interval;
        for (;;) {
            error_code ec;
            health_timer_.expires_at(wake_at);
            co_await health_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            if (ec || closed_ || !session_error_.empty()) co_return;
            auto now = steady::now();
            if (!inflight_.empty() || !queued_.empty()) {
                wake_at = now + interval;
                continue;
            }
            if (now - last_read_ < interval) {
                wake_at = last_read_ + interval;
                continue;
            }
            wake_at = now + interval;
            send_health_ping();
        }
    }

    void send_health_ping() {
        auto timeout = options_.request_timeout > std::chrono::milliseconds::zero()
                           ? options_.request_timeout
                           : options_.health_check_interval;
        if (options_.silence_timeout > std::chrono::milliseconds::zero())
            timeout = std::min(timeout, options_.silence_timeout);
        auto session = session_number_;
        auto handler = internal_handler([this, self = shared_from_this(), session](result r) {
            if (!r && r.error().code == errc::timeout && session == session_number_ && connected_) {
                end_session("health-check PING got no answer");
                error_code ignored;
                socket_.close(ignored);
            }
        });
        enqueue(pending(next_id_++, command("PING").payload(), std::move(handler),
                        steady::now() + timeout, nullptr));
    }

    // While replies are awaited, the server must send something within silence_timeout (or
    // the oldest request's own longer timeout): else it, or the network to it, is taken for
    // dead and the session ends. A server that is slow but sending is not silent.
    asio::awaitable<void> silence_loop() {
        auto bound = options_.silence_timeout;
        if (bound <= std::chrono::milliseconds::zero()) co_return co_await idle(silence_timer_);
        for (;;) {
            auto now = steady::now();
            auto wake_at = now + bound;
            if (!inflight_.empty()) {
                auto since = std::max(last_read_, awaiting_since_);
                auto allowed = std::max(bound, inflight_.front().patience);
                if (now - since >= allowed && !bytes_waiting())
                    co_return end_silent_session(now - since);
                wake_at = since + allowed;
            }
            error_code ec;
            silence_timer_.expires_at(wake_at);
            co_await silence_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            if (ec || closed_ || !session_error_.empty()) co_return;
        }
    }

    // Bytes the kernel holds that the read loop has not taken yet: after this process was
    // paused (SIGSTOP, a descheduled VM) the timer may run before the read that is due.
    bool bytes_waiting() {
        error_code ec;
        if (socket_.available(ec) == 0 || ec) return false;
        last_read_ = steady::now();
        return true;
    }

    void end_silent_session(steady::duration silent) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(silent).count();
        end_session(
            fmt::format("no byte from the server for {} ms while {} requests awaited a "
                        "reply",
                        ms, inflight_.size()));
        error_code ignored;
        socket_.close(ignored);
    }

    // Waits until the session ends (cancellation by ||).
    asio::awaitable<void> idle(asio::steady_timer& timer) {
        error_code ec;
        timer.expires_at(steady::time_point::max());
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }

    error other_session_error() const {
        return error{errc::not_replicated,
                     fmt::format("not sent: the connection to {} reconnected after the write, so "
                                 "WAIT would count another socket's writes; the write may be on "
                                 "the primary only",
                                 where_.display())};
    }

    void end_session(std::string why) {
        if (session_error_.empty()) session_error_ = std::move(why);
        ++session_number_;
        wake_.cancel();
        health_timer_.cancel();
        silence_timer_.cancel();
    }

    asio::any_io_executor executor_;
    connection_options options_;
    endpoint where_;
    std::shared_ptr<write_refusals> refusals_;  // the connection's, shared by its lanes
    socket_type socket_;
    asio::steady_timer wake_;
    asio::steady_timer deadline_timer_;
    asio::steady_timer backoff_timer_;
    asio::steady_timer health_timer_;
    asio::steady_timer silence_timer_;
    asio::steady_timer connect_timer_;
    log::logger log_;
    std::optional<reply_reader> reader_;

    std::deque<pending> queued_;
    std::deque<pending> inflight_;
    std::vector<script> scripts_;
    std::string write_buffer_;
    std::array<char, 64 * 1024> read_buffer_{};
    std::vector<reply> read_replies_;  // the replies of one read
    steady::time_point armed_deadline_ = steady::time_point::max();
    steady::time_point last_read_{};
    steady::time_point awaiting_since_{};  // when inflight_ last went from empty to not
    std::atomic<std::uint64_t> next_id_{1};

    // A read of many replies is delivered in up to parts_per_read parts (of at least
    // min_replies_per_part): the callers of the first part run and the writer sends what
    // they ask next while the rest wait. Delivered all at once, every next request waits for
    // the last caller to run, and a service and Redis under load can fall into taking turns
    // with one batch between them, each idle while the other works (docs/architecture.md,
    // "Redis client").
    static constexpr std::size_t parts_per_read = 4;
    static constexpr std::size_t min_replies_per_part = 8;
    static constexpr std::string_view asking_payload = "*1\r\n$6\r\nASKING\r\n";

    bool closed_ = false;
    bool fail_fast_ = false;  // a cluster node (node.hpp)
    bool connected_ = false;
    bool warned_ = false;
    bool connect_timed_out_ = false;
    std::uint64_t connect_attempt_ = 0;
    std::uint64_t session_number_ = 0;
    std::uint64_t session_id_ = 0;  // next_session_id's number for this socket; 0 while down
    std::size_t tombstones_ = 0;    // answered requests still in queued_
    std::string session_error_;
    std::string last_error_;
    std::atomic<bool> connected_flag_{false};
    std::atomic<std::uint64_t> requests_{0}, writes_{0}, replies_{0}, connects_{0}, outstanding_{0};

    void count_outstanding() { outstanding_ = queued_.size() - tombstones_ + inflight_.size(); }
};

// ---------------------------------------------------------------------------------------
// A node of a cluster connection (node.hpp).

std::shared_ptr<connection_impl> open_node(asio::any_io_executor executor,
                                           const connection_options& options, endpoint where,
                                           const std::vector<script>& scripts,
                                           std::shared_ptr<write_refusals> refusals) {
    auto node = std::make_shared<connection_impl>(std::move(executor), options, std::move(where),
                                                  std::move(refusals));
    node->enable_fail_fast();
    for (const auto& s : scripts) node->add_script(s);
    node->start();
    return node;
}

std::uint64_t send_to_node(connection_impl& node, std::string payload, steady::time_point deadline,
                           connection::handler_type handler, bool asking,
                           std::chrono::milliseconds patience, std::uint64_t session) {
    return node.send_direct(std::move(payload), deadline, std::move(handler), asking, patience,
                            session);
}

void cancel_on_node(connection_impl& node, std::uint64_t id) {
    node.cancel(id);
}
void add_node_script(connection_impl& node, const script& s) {
    node.add_script(s);
}
void close_node(connection_impl& node) {
    node.close();
}
bool node_connected(const connection_impl& node) {
    return node.connected();
}
std::uint64_t node_session(const connection_impl& node) {
    return node.session_id();
}
connection_stats node_stats(const connection_impl& node) {
    return node.stats();
}

}  // namespace detail

// ---------------------------------------------------------------------------------------

expected<connection, error> connection::create(asio::any_io_executor executor,
                                               connection_options options) {
    return create(std::span<const asio::any_io_executor>(&executor, 1), std::move(options));
}

namespace {

const asio::execution_context* context_of(const asio::any_io_executor& ex) {
    return &asio::query(ex, asio::execution::context_as<asio::execution_context&>);
}

}  // namespace

expected<connection, error> connection::create(std::span<const asio::any_io_executor> executors,
                                               connection_options options) {
    if (executors.empty()) throw std::invalid_argument("redis::connection: no executor");
    auto refusals = std::make_shared<detail::write_refusals>();
    auto made = [&]() -> expected<connection, error> {
        if (is_cluster_url(options.url)) {
            auto seeds = parse_cluster_url(options.url);
            if (!seeds) return unexpected(std::move(seeds).error());
            auto cluster = std::make_shared<detail::cluster_impl>(executors[0], options,
                                                                  std::move(*seeds), refusals);
            cluster->start();
            return connection(std::move(cluster));
        }
        auto where = parse_url(options.url);
        if (!where) return unexpected(std::move(where).error());
        std::vector<std::shared_ptr<detail::connection_impl>> lanes;
        for (const auto& ex : executors) {
            bool known = std::any_of(lanes.begin(), lanes.end(), [&](const auto& lane) {
                return context_of(lane->executor()) == context_of(ex);
            });
            if (!known)
                lanes.push_back(
                    std::make_shared<detail::connection_impl>(ex, options, *where, refusals));
        }
        for (auto& lane : lanes) lane->start();
        return connection(std::move(lanes));
    }();
    if (made) {
        made->wait_replicas_ = options.wait_replicas;
        made->replica_timeout_ = options.replica_timeout;
        made->refusals_ = std::move(refusals);
    }
    return made;
}

connection::connection(std::vector<std::shared_ptr<detail::connection_impl>> lanes)
    : lanes_(std::move(lanes)) {}
connection::connection(std::shared_ptr<detail::cluster_impl> cluster)
    : cluster_(std::move(cluster)) {}
connection::connection(connection&&) noexcept = default;
connection& connection::operator=(connection&& other) noexcept {
    if (this != &other) {
        close();
        lanes_ = std::move(other.lanes_);
        cluster_ = std::move(other.cluster_);
        refusals_ = std::move(other.refusals_);
        wait_replicas_ = other.wait_replicas_;
        replica_timeout_ = other.replica_timeout_;
    }
    return *this;
}
connection::~connection() {
    close();
}

void connection::submit(std::string payload, std::chrono::milliseconds timeout, const script* s,
                        handler_type handler) {
    if (cluster_) [[unlikely]]
        return cluster_->submit(std::move(payload), timeout, s, std::move(handler), std::nullopt);
    lane_for().submit(std::move(payload), timeout, s, std::move(handler));
}

// Requests are submitted on their caller's thread: the lane whose io_context this thread runs.
detail::connection_impl& connection::lane_for() const {
    if (lanes_.size() == 1) return *lanes_.front();
    for (const auto& lane : lanes_)
        if (concurrency::runs_in_this_thread(lane->executor())) return *lane;
    return *lanes_.front();
}

asio::awaitable<result> connection::submit_routed(std::string payload,
                                                  std::chrono::milliseconds timeout,
                                                  const detail::route& to) {
    co_return co_await asio::async_initiate<decltype(asio::use_awaitable), completion_signature>(
        [this, &to](auto handler, std::string payload, std::chrono::milliseconds timeout) {
            cluster_->submit(std::move(payload), timeout, nullptr, handler_type(std::move(handler)),
                             to);
        },
        asio::use_awaitable, std::move(payload), timeout);
}

namespace {

// The session of the last reply execute(), execute_at() or eval() returned on this thread:
// replicate(key) without a reply uses it (connection.hpp).
thread_local std::uint64_t last_reply_session = 0;

result&& noted(result&& r) {
    last_reply_session = r ? r->session() : 0;
    return std::move(r);
}

}  // namespace

asio::awaitable<result> connection::execute(command cmd, std::chrono::milliseconds timeout) {
    co_return noted(co_await async_execute(std::move(cmd), timeout, asio::use_awaitable));
}

asio::awaitable<result> connection::execute_at(std::string_view key, command cmd,
                                               std::chrono::milliseconds timeout) {
    if (!cluster_) co_return co_await execute(std::move(cmd), timeout);
    detail::route to{detail::route::kind::slot, key_slot(key)};
    co_return noted(co_await submit_routed(std::move(cmd).payload(), timeout, to));
}

asio::awaitable<expected<void, error>> connection::replicate(std::string_view key) {
    return replicate_on(key, last_reply_session);
}

asio::awaitable<expected<void, error>> connection::replicate(std::string_view key,
                                                             const reply& written) {
    return replicate_on(key, written.session());
}

// WAIT on the node serving `key`, sent only on the socket of session `session`.
asio::awaitable<expected<void, error>> connection::replicate_on(std::string_view key,
                                                                std::uint64_t session) {
    if (wait_replicas_ <= 0) co_return expected<void, error>{};
    if (session == 0)
        co_return unexpected(error{errc::not_replicated,
                                   "the write's connection session is unknown; WAIT not sent"});
    auto payload = command("WAIT", wait_replicas_, replica_timeout_.count()).payload();
    // WAIT answers by replica_timeout; the request's own timeout only covers a dead server.
    auto timeout = replica_timeout_ + std::chrono::seconds(2);
    auto r = co_await asio::async_initiate<decltype(asio::use_awaitable), completion_signature>(
        [this, key, session](auto handler, std::string payload, std::chrono::milliseconds t) {
            if (!cluster_)
                return lane_for().submit(std::move(payload), t, nullptr,
                                         handler_type(std::move(handler)), session);
            detail::route to{detail::route::kind::slot, key_slot(key)};
            cluster_->submit(std::move(payload), t, nullptr, handler_type(std::move(handler)), to,
                             session);
        },
        asio::use_awaitable, std::move(payload), timeout);
    if (!r) co_return unexpected(std::move(r).error());
    auto acknowledged = r->integer().value_or(0);
    if (acknowledged < wait_replicas_)
        co_return unexpected(
            error{errc::not_replicated,
                  fmt::format("{} of {} replicas acknowledged the write within {} ms", acknowledged,
                              wait_replicas_, replica_timeout_.count())});
    co_return expected<void, error>{};
}

asio::awaitable<result> connection::eval(const script& s, std::span<const std::string> keys,
                                         std::span<const std::string> args,
                                         std::chrono::milliseconds timeout) {
    std::vector<std::string_view> parts;
    parts.reserve(3 + keys.size() + args.size());
    auto numkeys = std::to_string(keys.size());
    parts.push_back("EVALSHA");
    parts.push_back(s.sha1());
    parts.push_back(numkeys);
    parts.insert(parts.end(), keys.begin(), keys.end());
    parts.insert(parts.end(), args.begin(), args.end());
    auto payload = command::from_args(std::span<const std::string_view>(parts)).payload();
    co_return noted(
        co_await asio::async_initiate<decltype(asio::use_awaitable), completion_signature>(
            [this, &s](auto handler, std::string payload, std::chrono::milliseconds timeout) {
                submit(std::move(payload), timeout, &s, handler_type(std::move(handler)));
            },
            asio::use_awaitable, std::move(payload), timeout));
}

void connection::add_script(const script& s) {
    if (cluster_) return cluster_->add_script(s);
    for (auto& lane : lanes_) lane->add_script(s);
}

asio::awaitable<expected<void, error>> connection::ping(std::chrono::milliseconds timeout) {
    if (cluster_) co_return co_await ping_cluster(timeout);
    auto r = co_await execute(command("PING"), timeout);
    if (!r) co_return unexpected(std::move(r).error());
    co_return expected<void, error>{};
}

// Every primary answers PING, and the map leaves no slot without a primary.
asio::awaitable<expected<void, error>> connection::ping_cluster(std::chrono::milliseconds timeout) {
    detail::route every{detail::route::kind::all};
    auto r = co_await submit_routed(command("PING").payload(), timeout, every);
    if (!r) co_return unexpected(std::move(r).error());
    if (auto gaps = cluster_->uncovered(); !gaps.empty())
        co_return unexpected(error{errc::not_connected, "no primary serves slots " + gaps});
    co_return expected<void, error>{};
}

void connection::close() {
    if (cluster_) cluster_->close();
    for (auto& lane : lanes_) lane->close();
}

bool connection::connected() const {
    if (cluster_) return cluster_->connected();
    return !lanes_.empty() && std::all_of(lanes_.begin(), lanes_.end(),
                                          [](const auto& lane) { return lane->connected(); });
}
namespace {
void add_refusals(connection_stats& stats, const detail::write_refusals* refusals) {
    if (!refusals) return;
    using kind = detail::write_refusals::kind;
    stats.refused_oom = refusals->count(kind::oom);
    stats.refused_misconf = refusals->count(kind::misconf);
    stats.refused_readonly = refusals->count(kind::readonly);
}
}  // namespace

std::optional<std::string> connection::write_refusal() const {
    if (!refusals_) return std::nullopt;
    return refusals_->current();
}

asio::awaitable<expected<void, error>> connection::probe_writes(std::chrono::milliseconds timeout) {
    if (!refusals_ || !refusals_->refusing()) co_return expected<void, error>{};
    auto written =
        co_await execute(command("SET", "keel:writes-probe", "1", "PX", "1000"), timeout);
    if (!written) co_return unexpected(std::move(written).error());
    if (auto line = refusals_->probe_succeeded()) log::logger("redis").info("{}", *line);
    co_return expected<void, error>{};
}

connection_stats connection::stats() const {
    if (cluster_) {
        auto out = cluster_->stats();
        add_refusals(out, refusals_.get());
        return out;
    }
    connection_stats sum;
    add_refusals(sum, refusals_.get());
    sum.connected = !lanes_.empty();
    for (const auto& lane : lanes_) {
        auto one = lane->stats();
        sum.requests += one.requests;
        sum.writes += one.writes;
        sum.replies += one.replies;
        sum.connects += one.connects;
        sum.outstanding += one.outstanding;
        sum.connected = sum.connected && one.connected;
    }
    return sum;
}
const endpoint& connection::where() const {
    if (cluster_) return cluster_->where();
    return lanes_.front()->where();
}
const asio::any_io_executor& connection::get_executor() const {
    if (cluster_) return cluster_->executor();
    return lanes_.front()->executor();
}
std::size_t connection::lanes() const {
    return cluster_ ? 1 : lanes_.size();
}

}  // namespace keel::redis
