#pragma once

/// @file
/// The service runtime: N threads, one io_context each, running until SIGINT/SIGTERM or
/// stop(), then shutting down gracefully.
///
/// Shutdown has four phases. (1) Every on_shutdown hook runs: servers stop accepting and
/// close idle connections. (2) Work spawned through the service keeps running until it
/// finishes or the drain deadline passes. (3) What is left is cancelled (terminal
/// cancellation through each task's cancellation slot) and given `cancel_grace` to unwind.
/// (4) Every on_drained hook runs on its thread. Then the threads are joined and run()
/// returns 0.
///
/// Thread-safety: stop(), spawn() and on_shutdown() may be called from any thread.

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <keel/framework/clock.hpp>
#include <keel/framework/config.hpp>
#include <keel/framework/log.hpp>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace keel {

namespace trace {
class span_sink;
}

/// How a service runs and shuts down.
struct service_options {
    std::size_t threads = 0;  ///< 0: one per core
    /// How long shutdown waits for spawned work before cancelling it.
    std::chrono::milliseconds drain_timeout{10'000};
    /// How long cancelled work has to unwind.
    std::chrono::milliseconds cancel_grace{2'000};
    bool handle_signals = true;          ///< SIGINT/SIGTERM begin shutdown
    std::shared_ptr<keel::clock> clock;  ///< null: the system clock
};

/// Adds the runtime's own options (threads, drain_timeout, log_level, log_format) to a schema.
void add_service_options(config::schema& schema);
/// Reads them back, and configures logging from them.
service_options service_options_from(const config::values& values);

/// The service runtime: threads with an io_context each, and graceful shutdown; see the file's
/// description.
class service {
  public:
    /// A service with `options`; its threads start in run().
    explicit service(service_options options = {});
    ~service();
    service(const service&) = delete;
    service& operator=(const service&) = delete;

    /// The number of threads (and io_contexts).
    std::size_t thread_count() const { return contexts_.size(); }
    /// The io_context of thread `index`.
    asio::io_context& context(std::size_t index) { return *contexts_.at(index); }
    /// The executor of thread `index`.
    asio::any_io_executor executor(std::size_t index) { return context(index).get_executor(); }
    /// Round-robin over the threads, for spreading new work.
    asio::any_io_executor next_executor();
    /// The clock everything in the service reads and waits on.
    keel::clock& clock() { return *clock_; }
    /// The same clock, shared.
    std::shared_ptr<keel::clock> clock_ptr() const { return clock_; }
    /// The runtime's logger.
    const log::logger& logger() const { return log_; }

    /// Where the finished spans of the servers and clients built on this service go (an
    /// OTLP exporter, keel/http/otlp.hpp), or null (the default): then none are made. A
    /// server's or client's own option takes precedence. Read on every request, so it may be
    /// set before or while the service runs; the sink must outlive run().
    void set_span_sink(trace::span_sink* sink) { span_sink_.store(sink); }
    /// The span sink; null: none.
    trace::span_sink* span_sink() const { return span_sink_.load(std::memory_order_acquire); }

    /// Runs `work` on the given thread as part of the service: shutdown waits for it until
    /// the drain deadline, then cancels it. An exception escaping it is logged with `name`.
    void spawn(std::size_t thread, std::string name, asio::awaitable<void> work);

    /// The same for a callable returning awaitable<void>, kept alive until it finishes.
    /// Prefer this for lambdas: a coroutine lambda invoked in place dies with its captures.
    template <class F>
    requires std::is_invocable_r_v<asio::awaitable<void>, F&> void spawn(std::size_t thread,
                                                                         std::string name, F work) {
        spawn(thread, std::move(name), invoke_owned(std::move(work)));
    }

    /// Called once, on the thread that runs run(), when shutdown begins. Hooks must not
    /// block; they post to their own executors.
    void on_shutdown(std::function<void()> hook);
    /// Called once on thread `thread` after the drain (every spawned task finished or was
    /// cancelled), while the threads still run, in the order registered; run() waits for
    /// each. For what must outlive the requests in flight and stop before the threads do
    /// (a process engine: stopped after HTTP has drained, before Redis closes).
    void on_drained(std::size_t thread, std::function<void()> hook);

    /// Starts the threads and blocks until shutdown completes. Returns the exit code: 0.
    int run();
    /// Begins graceful shutdown. Idempotent.
    void stop();
    /// Whether shutdown has begun.
    bool stopping() const { return stopping_.load(); }
    /// Number of spawned tasks still running.
    std::size_t active_tasks() const;

  private:
    template <class F>
    static asio::awaitable<void> invoke_owned(F work) {
        co_await work();
    }

    struct task;
    void finish(std::list<task>::iterator it);
    void cancel_all();
    void run_drained_hooks();
    bool wait_tasks_until(std::chrono::steady_clock::time_point deadline);

    service_options options_;
    std::shared_ptr<keel::clock> clock_;
    log::logger log_{"service"};
    std::vector<std::unique_ptr<asio::io_context>> contexts_;
    std::atomic<std::size_t> next_{0};
    std::atomic<trace::span_sink*> span_sink_{nullptr};

    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::list<task> tasks_;
    std::vector<std::function<void()>> hooks_;
    std::vector<std::pair<std::size_t, std::function<void()>>> drained_hooks_;
    std::atomic<bool> stopping_{false};
    bool stop_requested_ = false;
    bool cancelled_ = false;
};

}  // namespace keel
