#pragma once

/// @file
/// Cancellation tokens that form a tree.
///
/// A cancel_source owns a node of the tree; its token() lets others observe it. A source made
/// from a parent token is that node's child: cancelling a parent cancels every descendant at
/// once, cancelling a child leaves its parent alone. Nurseries and tasks are nodes of the same
/// tree (nursery::token(), join_handle::token()), so a source made from a nursery's token is
/// cancelled with the nursery.
///
/// A token reaches Asio operations through with_cancellation(token, op) (combinators.hpp),
/// which runs `op` with a cancellation slot that the token triggers; sockets, timers, clock
/// waits and keel::redis requests honour it. A callback can be attached with
/// cancel_registration.
///
/// Thread-safety: none. A tree belongs to one executor (one io_context thread); to cancel
/// from another thread, post the cancel() to that executor.

#include <boost/asio/cancellation_type.hpp>
#include <functional>
#include <keel/framework/concurrency/detail/intrusive.hpp>
#include <memory>

namespace keel::concurrency {

namespace asio = boost::asio;

namespace detail {

class cancel_callback : public list_hook {
  public:
    virtual ~cancel_callback() = default;
    virtual void invoke(asio::cancellation_type type) = 0;
};

// A node of the cancellation tree. Subclasses (tasks, nurseries) react in on_cancel().
class cancel_node : public ref_counted, public list_hook {
  public:
    explicit cancel_node(cancel_node* parent = nullptr);
    ~cancel_node() override;

    // Cancels this node, then its descendants, then runs its callbacks. Idempotent.
    void cancel(asio::cancellation_type type = asio::cancellation_type::terminal);
    bool cancelled() const noexcept { return type_ != asio::cancellation_type::none; }
    asio::cancellation_type cancel_type() const noexcept { return type_; }

    // Runs cb.invoke() on cancellation, or at once when already cancelled.
    void add_callback(cancel_callback& cb);

  protected:
    virtual void on_cancel(asio::cancellation_type) {}

  private:
    cancel_node* parent_ = nullptr;
    list<cancel_node> children_;
    std::unique_ptr<list<cancel_callback>> callbacks_;  // rare: allocated on first use
    asio::cancellation_type type_ = asio::cancellation_type::none;
};

}  // namespace detail

/// Observes one node of the tree. A default-constructed token is never cancelled. Copies
/// share the node and keep it alive.
class cancel_token {
  public:
    cancel_token() = default;
    /// A token observing `node` (how nurseries and tasks hand out theirs).
    explicit cancel_token(detail::ref<detail::cancel_node> node) : node_(std::move(node)) {}

    /// Whether the node was cancelled.
    bool cancelled() const noexcept { return node_ && node_->cancelled(); }
    /// How it was cancelled; none while it is not.
    asio::cancellation_type type() const noexcept {
        return node_ ? node_->cancel_type() : asio::cancellation_type::none;
    }
    /// Whether it observes a node at all (a default-constructed token does not).
    bool can_be_cancelled() const noexcept { return static_cast<bool>(node_); }
    /// The node observed; null for a default-constructed token.
    detail::cancel_node* node() const noexcept { return node_.get(); }

  private:
    detail::ref<detail::cancel_node> node_;
};

/// Owns a node of the tree: a root, or the child of `parent`.
class cancel_source {
  public:
    cancel_source();
    /// A child of `parent`'s node: cancelled with it.
    explicit cancel_source(const cancel_token& parent);

    /// A token observing this source's node.
    cancel_token token() const { return cancel_token(node_); }
    /// Cancels the node and its descendants, then runs their callbacks. Idempotent.
    void cancel(asio::cancellation_type type = asio::cancellation_type::terminal) {
        node_->cancel(type);
    }
    /// Whether the node was cancelled (by this source or an ancestor).
    bool cancelled() const noexcept { return node_->cancelled(); }

  private:
    detail::ref<detail::cancel_node> node_;
};

/// Calls `callback(type)` once when `token` is cancelled (immediately if it already is),
/// unless the registration is destroyed first. Not movable: construct it where it lives.
class cancel_registration : private detail::cancel_callback {
  public:
    /// Registers `callback` on `token`.
    cancel_registration(const cancel_token& token,
                        std::function<void(asio::cancellation_type)> callback);
    cancel_registration(const cancel_registration&) = delete;
    cancel_registration& operator=(const cancel_registration&) = delete;
    ~cancel_registration() override = default;

  private:
    void invoke(asio::cancellation_type type) override;

    cancel_token token_;
    std::function<void(asio::cancellation_type)> callback_;
};

}  // namespace keel::concurrency
