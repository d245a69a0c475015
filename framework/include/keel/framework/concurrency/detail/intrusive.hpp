#pragma once

// Building blocks shared by the concurrency primitives: a single-threaded reference count
// and an intrusive doubly-linked list whose nodes unlink themselves when destroyed. Waiters
// live in the frames of the coroutines that wait, so waiting allocates no list nodes.

#include <cstddef>
#include <utility>

namespace keel::concurrency::detail {

// Per-thread pool of the blocks that tasks, scopes and cancellation nodes live in: blocks are
// carved from slabs per size (in steps of 8 bytes, up to 256), without a malloc header each,
// and freed blocks wait in a free list per size for the next object of that size. Larger
// objects go to the heap. A nursery that spawns thousands of tasks reuses their blocks
// instead of going through malloc for each.
void* pool_allocate(std::size_t size);
void pool_deallocate(void* p, std::size_t size) noexcept;

// Non-atomic reference count: every primitive here lives on one executor. Objects come from
// the per-thread pool above.
class ref_counted {
  public:
    static void* operator new(std::size_t size) { return pool_allocate(size); }
    static void operator delete(void* p, std::size_t size) { pool_deallocate(p, size); }

    ref_counted() = default;
    ref_counted(const ref_counted&) = delete;
    ref_counted& operator=(const ref_counted&) = delete;

    void add_ref() noexcept { ++refs_; }
    void release() noexcept {
        if (--refs_ == 0) delete this;
    }

  protected:
    virtual ~ref_counted() = default;

  private:
    std::size_t refs_ = 0;
};

// A shared pointer to a ref_counted object.
template <class T>
class ref {
  public:
    ref() = default;
    explicit ref(T* p) noexcept : p_(p) {
        if (p_) p_->add_ref();
    }
    ref(const ref& other) noexcept : ref(other.p_) {}
    ref(ref&& other) noexcept : p_(std::exchange(other.p_, nullptr)) {}
    template <class U>
    ref(ref<U> other) noexcept : p_(other.detach()) {}
    ref& operator=(ref other) noexcept {
        std::swap(p_, other.p_);
        return *this;
    }
    ~ref() {
        if (p_) p_->release();
    }

    T* get() const noexcept { return p_; }
    T* operator->() const noexcept { return p_; }
    T& operator*() const noexcept { return *p_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }
    T* detach() noexcept { return std::exchange(p_, nullptr); }

  private:
    T* p_ = nullptr;
};

template <class T, class... Args>
ref<T> make_ref(Args&&... args) {
    return ref<T>(new T(std::forward<Args>(args)...));
}

// A node of an intrusive list. Destroying a linked node unlinks it.
class list_hook {
  public:
    list_hook() = default;
    list_hook(const list_hook&) = delete;
    list_hook& operator=(const list_hook&) = delete;
    ~list_hook() { unlink(); }

    bool linked() const noexcept { return next_ != nullptr; }
    void unlink() noexcept {
        if (!next_) return;
        prev_->next_ = next_;
        next_->prev_ = prev_;
        prev_ = next_ = nullptr;
    }

  private:
    template <class T>
    friend class list;
    list_hook* prev_ = nullptr;
    list_hook* next_ = nullptr;
};

// A circular list of T, which must derive from list_hook. It owns nothing.
template <class T>
class list {
  public:
    list() { head_.prev_ = head_.next_ = &head_; }
    list(const list&) = delete;
    list& operator=(const list&) = delete;
    ~list() { clear(); }

    bool empty() const noexcept { return head_.next_ == &head_; }
    T& front() noexcept { return static_cast<T&>(*head_.next_); }

    void push_back(T& node) noexcept {
        list_hook& h = node;
        h.unlink();
        h.prev_ = head_.prev_;
        h.next_ = &head_;
        head_.prev_->next_ = &h;
        head_.prev_ = &h;
    }

    T* pop_front() noexcept {
        if (empty()) return nullptr;
        T& node = front();
        static_cast<list_hook&>(node).unlink();
        return &node;
    }

    void clear() noexcept {
        while (!empty()) head_.next_->unlink();
    }

    template <class F>
    void for_each(F&& f) {
        for (list_hook* h = head_.next_; h != &head_; h = h->next_) f(static_cast<T&>(*h));
    }

  private:
    struct sentinel : list_hook {};
    list_hook head_;
};

}  // namespace keel::concurrency::detail
