#include <boost/asio/bind_cancellation_slot.hpp>
#include <cstddef>
#include <keel/framework/concurrency/task.hpp>
#include <mutex>
#include <new>
#include <vector>

namespace keel::concurrency {

bool is_cancellation(const std::exception_ptr& error) noexcept {
    if (!error) return false;
    try {
        std::rethrow_exception(error);
    } catch (const boost::system::system_error& e) {
        return e.code() == asio::error::operation_aborted;
    } catch (...) {
        return false;
    }
}

namespace detail {

namespace {

// Slabs are never given back: blocks freed on one thread may be reused by another (a task
// of a strand can end on another thread of its io_context), so no slab is ever known to be
// unused. The memory stays reachable from this list and is reused by later objects of the
// same size, as malloc keeps freed chunks.
std::mutex slabs_mutex;
std::vector<void*>* slabs = new std::vector<void*>;

void* new_slab(std::size_t size) {
    void* p = ::operator new(size);
    std::lock_guard lock(slabs_mutex);
    slabs->push_back(p);
    return p;
}

class block_pool {
  public:
    static constexpr std::size_t step = 8;
    static constexpr std::size_t classes = 32;  // blocks of up to 256 bytes
    static constexpr std::size_t slab_size = 16384;

    static std::size_t class_of(std::size_t size) noexcept { return (size + step - 1) / step - 1; }

    void* allocate(std::size_t size) {
        auto c = class_of(size);
        if (c >= classes) return ::operator new(size);
        if (auto* b = free_[c]) {
            free_[c] = b->next;
            return b;
        }
        const std::size_t block = (c + 1) * step;
        if (static_cast<std::size_t>(end_[c] - next_[c]) < block) {
            next_[c] = static_cast<std::byte*>(new_slab(slab_size));
            end_[c] = next_[c] + slab_size / block * block;
        }
        void* p = next_[c];
        next_[c] += block;
        return p;
    }

    void deallocate(void* p, std::size_t size) noexcept {
        auto c = class_of(size);
        if (c >= classes) {
            ::operator delete(p);
            return;
        }
        free_[c] = new (p) block{free_[c]};
    }

  private:
    struct block {
        block* next;
    };
    block* free_[classes] = {};
    std::byte* next_[classes] = {};
    std::byte* end_[classes] = {};
};

thread_local block_pool pool;

}  // namespace

void* pool_allocate(std::size_t size) {
    return pool.allocate(size);
}

void pool_deallocate(void* p, std::size_t size) noexcept {
    pool.deallocate(p, size);
}

task_base::task_base(scope& owner, std::size_t index, bool counted)
    : cancel_node(&owner),
      index_(static_cast<std::uint32_t>(index)),
      owner_(&owner),
      counted_(counted) {}

void task_base::started() {
    started_ = true;
    // A cancellation that arrived before the coroutine ran is delivered now: its first
    // co_await throws operation_aborted.
    if (cancelled()) signal_.emit(cancel_type());
}

void task_base::end_inline() {
    inline_ = false;
    if (std::exchange(held_cancel_, false) && status_ == task_status::running)
        signal_.emit(cancel_type());
}

void task_base::on_cancel(asio::cancellation_type type) {
    if (!started_ || status_ != task_status::running) return;
    if (inline_)
        held_cancel_ = true;
    else
        signal_.emit(type);
}

void task_base::finish(std::exception_ptr error) {
    if (error && !error_) error_ = std::move(error);
    if (!error_)
        status_ = task_status::succeeded;
    else if (cancelled() && is_cancellation(error_))
        status_ = task_status::cancelled;
    else
        status_ = task_status::failed;
    auto* owner = std::exchange(owner_, nullptr);
    if (owner && counted_) --owner->counted_;
    // Joiners are released before the owner's policy runs, so a joiner that the policy
    // cancels still gets this task's outcome. The first is resumed last and inline, as
    // co_spawn resumes the coroutine awaiting it; any others are posted.
    auto first = release_joiners();
    if (owner) owner->child_finished(*this);
    if (first) first->dispatch();
    resume_first_joiner();
}

void task_base::rethrow_unless_succeeded() const {
    switch (status_) {
        case task_status::succeeded:
            return;
        case task_status::cancelled:
            throw cancelled_error();
        case task_status::failed:
            std::rethrow_exception(error_);
        case task_status::running:
            throw std::logic_error("keel::concurrency: task has not finished");
    }
}

namespace {

// Waits for a scope to become idle; cancelling the waiting coroutine cancels the scope but
// does not end the wait.
class idle_waiter final : public list_waiter {
  public:
    explicit idle_waiter(scope& s) : scope_(s) {}

  protected:
    void on_cancel(asio::cancellation_type) override { scope_.cancel_from(scope::cause::outside); }

  private:
    scope& scope_;
};

}  // namespace

scope::scope(asio::any_io_executor executor, cancel_node* parent, std::size_t limit)
    : cancel_node(parent), executor_(std::move(executor)), limit_(limit) {
    if (cancelled()) cause_ = cause::outside;
}

void scope::check_spawn(bool counted) const {
    if (closed_)
        throw std::logic_error("keel::concurrency: spawn into a nursery that has finished");
    if (counted && counted_ >= limit_) throw spawn_limit_error(limit_);
}

void scope::cancel_from(cause c) {
    if (cancelled()) return;
    cause_ = c;
    cancel();
}

void scope::on_cancel(asio::cancellation_type) {
    if (cause_ == cause::none) cause_ = cause::outside;
}

void scope::on_child_finished(task_base& t) {
    if (t.status() == task_status::failed && !cancelled()) {
        first_error_ = t.error();
        cancel_from(cause::failure);
    }
}

void scope::child_finished(task_base& t) {
    --active_;
    on_child_finished(t);
    if (active_ == 0) wake_all(idle_waiters_);
}

asio::awaitable<void> scope::join_all() {
    // The caller was cancelled before it got here: its slot will not fire again.
    auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) cancel_from(cause::outside);
    if (active_ == 0) co_return;
    auto ex = co_await asio::this_coro::executor;
    idle_waiter w(*this);
    idle_waiters_.push_back(w);
    co_await w.async_wait(ex, asio::use_awaitable);
}

asio::awaitable<void> scope::join_all_shielded() {
    if (active_ == 0) co_return;
    auto ex = co_await asio::this_coro::executor;
    idle_waiter w(*this);
    idle_waiters_.push_back(w);
    co_await w.async_wait(
        ex, asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable));
}

}  // namespace detail

}  // namespace keel::concurrency
