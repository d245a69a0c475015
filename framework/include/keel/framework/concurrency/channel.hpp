#pragma once

/// @file
/// channel<T>: a queue between tasks, with Go's semantics (Asio 1.81's experimental channel
/// drops buffered values on close and misbehaves after cancellation, hence this one).
///
/// - Capacity 0 is a rendezvous: send completes when a receiver takes the value. Capacity N
///   buffers up to N values; send suspends only while the buffer is full.
/// - recv returns the next value, or an empty optional once the channel is closed and
///   drained. Values are received in the order they were sent.
/// - try_send / try_recv never suspend: try_send returns false when the value cannot be
///   taken now, try_recv returns an empty optional when nothing is there.
/// - close() is idempotent and wakes every waiter: blocked receivers get an empty optional,
///   blocked senders get channel_closed_error (their value was never taken). Buffered values
///   are kept and still received. send or try_send after close throws channel_closed_error.
/// - send and recv are cancellable: a cancelled send has not delivered its value, a
///   cancelled recv has not taken one.
///
/// A channel is a handle: copies share the same channel. Thread-safety: none; a channel
/// belongs to one executor and is used by tasks on it.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <deque>
#include <keel/framework/concurrency/detail/intrusive.hpp>
#include <keel/framework/concurrency/detail/waiter.hpp>
#include <keel/framework/concurrency/errors.hpp>
#include <optional>
#include <utility>

namespace keel::concurrency {

namespace detail {

// A party blocked in recv (a plain receive or a select case).
template <class T>
class receiver : public list_hook {
  public:
    virtual ~receiver() = default;
    virtual void deliver(T&& value) = 0;
    virtual void closed() = 0;
};

// A party blocked in send, holding the value it offers.
template <class T>
class sender : public list_hook {
  public:
    virtual ~sender() = default;
    virtual T take() = 0;
    virtual void closed() = 0;
};

// Invariants: receivers wait only while the buffer is empty and no sender waits; senders
// wait only while the buffer is full.
template <class T>
class channel_state final : public ref_counted {
  public:
    explicit channel_state(std::size_t capacity) : capacity_(capacity) {}

    std::size_t capacity() const noexcept { return capacity_; }
    std::size_t size() const noexcept { return buffer_.size(); }
    bool is_closed() const noexcept { return closed_; }
    bool recv_ready() const noexcept { return !buffer_.empty() || !senders_.empty() || closed_; }
    bool send_ready() const noexcept {
        return closed_ || !receivers_.empty() || buffer_.size() < capacity_;
    }

    // Hands `value` to a waiting receiver or the buffer. Moves from it only on success.
    template <class U>
    bool try_push(U&& value) {
        if (closed_) throw channel_closed_error();
        if (auto* r = receivers_.pop_front()) {
            r->deliver(T(std::forward<U>(value)));
            return true;
        }
        if (buffer_.size() < capacity_) {
            buffer_.emplace_back(std::forward<U>(value));
            return true;
        }
        return false;
    }

    std::optional<T> try_pop() {
        if (!buffer_.empty()) {
            std::optional<T> value(std::move(buffer_.front()));
            buffer_.pop_front();
            if (auto* s = senders_.pop_front()) buffer_.push_back(s->take());
            return value;
        }
        if (auto* s = senders_.pop_front()) return s->take();
        return std::nullopt;
    }

    void wait_recv(receiver<T>& r) { receivers_.push_back(r); }
    void wait_send(sender<T>& s) { senders_.push_back(s); }

    void close() {
        if (closed_) return;
        closed_ = true;
        while (auto* r = receivers_.pop_front()) r->closed();
        while (auto* s = senders_.pop_front()) s->closed();
    }

  private:
    std::size_t capacity_;
    std::deque<T> buffer_;
    list<receiver<T>> receivers_;
    list<sender<T>> senders_;
    bool closed_ = false;
};

template <class T>
class recv_waiter final : public waiter, public receiver<T> {
  public:
    std::optional<T> value;

    void deliver(T&& v) override {
        value.emplace(std::move(v));
        complete();
    }
    void closed() override { complete(); }

  protected:
    void on_cancel(asio::cancellation_type) override {
        receiver<T>::unlink();
        complete(asio::error::operation_aborted);
    }
};

template <class T>
class send_waiter final : public waiter, public sender<T> {
  public:
    explicit send_waiter(T v) : value(std::move(v)) {}
    T value;
    bool was_closed = false;

    T take() override {
        complete();
        return std::move(value);
    }
    void closed() override {
        was_closed = true;
        complete();
    }

  protected:
    void on_cancel(asio::cancellation_type) override {
        sender<T>::unlink();
        complete(asio::error::operation_aborted);
    }
};

}  // namespace detail

/// A queue between tasks with Go's semantics; a handle (copies share the channel); see the file's
/// description.
template <class T>
class channel {
  public:
    /// The type of the values.
    using value_type = T;

    /// A channel buffering up to `capacity` values; 0: a rendezvous.
    explicit channel(std::size_t capacity = 0) : state_(new detail::channel_state<T>(capacity)) {}

    /// Suspends while the channel is full (or, with capacity 0, until a receiver takes the
    /// value). Throws channel_closed_error if the channel is or becomes closed first.
    asio::awaitable<void> send(T value) { return send_to(state_, std::move(value)); }

    /// The next value, or an empty optional once the channel is closed and drained.
    asio::awaitable<std::optional<T>> recv() { return recv_from(state_); }

    /// Sends without suspending; false (and `value` untouched) if it cannot be taken now.
    template <class U = T>
    bool try_send(U&& value) {
        return state_->try_push(std::forward<U>(value));
    }
    /// The next value without suspending; empty when nothing is there.
    std::optional<T> try_recv() { return state_->try_pop(); }

    /// Closes the channel and wakes every waiter. Idempotent.
    void close() { state_->close(); }
    /// Whether close() was called.
    bool closed() const noexcept { return state_->is_closed(); }
    /// Buffered values.
    std::size_t size() const noexcept { return state_->size(); }
    /// The buffer's size, as made.
    std::size_t capacity() const noexcept { return state_->capacity(); }

    /// The shared state (select's cases wait on it).
    detail::channel_state<T>& state() const noexcept { return *state_; }

  private:
    using state_ref = detail::ref<detail::channel_state<T>>;

    // The coroutines hold the state, not the handle, which may be gone before they run.
    static asio::awaitable<void> send_to(state_ref s, T value) {
        if (s->try_push(std::move(value))) co_return;
        auto ex = co_await asio::this_coro::executor;
        detail::send_waiter<T> w(std::move(value));
        s->wait_send(w);
        co_await w.async_wait(ex, asio::use_awaitable);
        if (w.was_closed) throw channel_closed_error();
    }

    static asio::awaitable<std::optional<T>> recv_from(state_ref s) {
        if (auto value = s->try_pop()) co_return value;
        if (s->is_closed()) co_return std::nullopt;
        auto ex = co_await asio::this_coro::executor;
        detail::recv_waiter<T> w;
        s->wait_recv(w);
        co_await w.async_wait(ex, asio::use_awaitable);
        co_return std::move(w.value);
    }

    state_ref state_;
};

}  // namespace keel::concurrency
