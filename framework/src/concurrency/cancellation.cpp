#include <keel/framework/concurrency/cancellation.hpp>
#include <vector>

namespace keel::concurrency {

namespace detail {

cancel_node::cancel_node(cancel_node* parent) : parent_(parent) {
    if (!parent_) return;
    parent_->children_.push_back(*this);
    type_ = parent_->type_;
}

cancel_node::~cancel_node() {
    list_hook::unlink();
    children_.for_each([](cancel_node& child) { child.parent_ = nullptr; });
    children_.clear();
    callbacks_.reset();
}

void cancel_node::cancel(asio::cancellation_type type) {
    if (cancelled() || type == asio::cancellation_type::none) return;
    type_ = type;
    ref<cancel_node> self(this);
    on_cancel(type);
    // Callbacks may create or destroy nodes: hold every child while walking them.
    std::vector<ref<cancel_node>> children;
    children_.for_each([&](cancel_node& child) { children.emplace_back(&child); });
    for (auto& child : children) child->cancel(type);
    if (callbacks_)
        while (auto* cb = callbacks_->pop_front()) cb->invoke(type);
}

void cancel_node::add_callback(cancel_callback& cb) {
    if (cancelled())
        cb.invoke(type_);
    else {
        if (!callbacks_) callbacks_ = std::make_unique<list<cancel_callback>>();
        callbacks_->push_back(cb);
    }
}

}  // namespace detail

cancel_source::cancel_source() : node_(new detail::cancel_node()) {}

cancel_source::cancel_source(const cancel_token& parent)
    : node_(new detail::cancel_node(parent.node())) {}

cancel_registration::cancel_registration(const cancel_token& token,
                                         std::function<void(asio::cancellation_type)> callback)
    : token_(token), callback_(std::move(callback)) {
    if (auto* node = token_.node()) node->add_callback(*this);
}

void cancel_registration::invoke(asio::cancellation_type type) {
    if (callback_) callback_(type);
}

}  // namespace keel::concurrency
