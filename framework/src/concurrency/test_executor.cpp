#include <keel/framework/concurrency/context.hpp>
#include <keel/framework/concurrency/test_executor.hpp>

namespace keel::concurrency {

asio::execution_context& test_executor::query(asio::execution::context_t) const noexcept {
    return scheduler_->io_;
}

test_scheduler::test_scheduler(std::uint64_t seed, time_point start)
    : random_(seed), clock_(std::make_shared<manual_clock>(start)) {
    set_clock(io_, clock_);
    seed_random(io_, seed * 0x9E3779B97F4A7C15ull + 1);
}

test_scheduler::~test_scheduler() {
    closing_ = true;
    // Clock waits still pending are abandoned (their handlers dropped with the queue).
    set_clock(io_, nullptr);
    clock_.reset();
    // Destroying a handler may destroy coroutine frames that post again: drain until empty.
    while (!ready_.empty()) {
        auto items = std::move(ready_);
        ready_.clear();
    }
}

void test_scheduler::mix(std::uint64_t value) noexcept {
    for (int i = 0; i < 8; ++i) {
        hash_ ^= (value >> (i * 8)) & 0xff;
        hash_ *= 1099511628211ull;
    }
}

bool test_scheduler::idle_io() {
    io_.restart();
    return io_.poll() == 0;
}

bool test_scheduler::step() {
    idle_io();
    if (!ready_.empty()) {
        auto index = static_cast<std::size_t>(random_() % ready_.size());
        mix(ready_.size());
        mix(index);
        std::swap(ready_[index], ready_.back());
        auto next = std::move(ready_.back());
        ready_.pop_back();
        ++steps_;
        next->run();
        return true;
    }
    if (auto deadline = clock_->next_deadline()) {
        mix(static_cast<std::uint64_t>(deadline->time_since_epoch().count()));
        clock_->advance_to(*deadline);
        return true;
    }
    return false;
}

std::size_t test_scheduler::run() {
    std::size_t before = steps_;
    while (step()) {
    }
    return steps_ - before;
}

void test_scheduler::note(std::string_view event) {
    notes_.emplace_back(event);
    for (char c : event) mix(static_cast<unsigned char>(c));
    mix(0xff);
}

}  // namespace keel::concurrency
