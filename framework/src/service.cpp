#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <future>
#include <keel/framework/concurrency/context.hpp>
#include <keel/framework/service.hpp>

namespace keel {

struct service::task {
    std::uint64_t id;
    std::string name;
    asio::any_io_executor executor;
    asio::cancellation_signal signal;
};

void add_service_options(config::schema& schema) {
    auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
    schema.add({"threads", config::kind::integer, config::value{cores},
                "worker threads, one io_context each", 1, 1024});
    schema.add({"drain_timeout", config::kind::duration, config::value{config::duration{10'000}},
                "how long shutdown waits for in-flight work before cancelling it", 0, 3600});
    schema.add("log_level", config::kind::string, config::value{std::string("info")},
               "trace, debug, info, warn, error, critical or off");
    schema.add("log_format", config::kind::string, config::value{std::string("text")},
               "text or json (one JSON object per line)");
}

service_options service_options_from(const config::values& values) {
    log::options lo;
    auto lvl = log::parse_level(values.get_string("log_level"));
    auto fmt = log::parse_format(values.get_string("log_format"));
    if (!lvl)
        throw std::invalid_argument("configuration error: log_level: unknown level '" +
                                    values.get_string("log_level") + "'");
    if (!fmt) throw std::invalid_argument("configuration error: log_format: must be text or json");
    lo.min_level = *lvl;
    lo.output = *fmt;
    log::configure(lo);
    if (const auto& ignored = values.ignored_environment(); !ignored.empty()) {
        std::string names;
        for (const auto& name : ignored) names += (names.empty() ? "" : ", ") + name;
        log::logger("config").warn("ignoring environment variables that name no option: {}", names);
    }

    service_options opts;
    opts.threads = static_cast<std::size_t>(values.get_int("threads"));
    opts.drain_timeout = values.get_duration("drain_timeout");
    return opts;
}

service::service(service_options options)
    : options_(std::move(options)),
      clock_(options_.clock ? options_.clock : std::make_shared<system_clock>()) {
    auto n =
        options_.threads ? options_.threads : std::max(1u, std::thread::hardware_concurrency());
    for (std::size_t i = 0; i < n; ++i) {
        contexts_.push_back(std::make_unique<asio::io_context>(1));
        // Sleeps and timeouts of keel::concurrency on this thread wait on the service's clock.
        concurrency::set_clock(*contexts_.back(), clock_);
    }
}

service::~service() = default;

asio::any_io_executor service::next_executor() {
    return executor(next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size());
}

void service::spawn(std::size_t thread, std::string name, asio::awaitable<void> work) {
    std::list<task>::iterator it;
    bool cancel_now = false;
    {
        std::lock_guard lock(mutex_);
        static std::atomic<std::uint64_t> ids{0};
        tasks_.emplace_back(ids++, std::move(name), executor(thread));
        it = std::prev(tasks_.end());
        cancel_now = cancelled_;
    }
    asio::co_spawn(
        it->executor, std::move(work),
        asio::bind_cancellation_slot(it->signal.slot(), [this, it](std::exception_ptr e) {
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const boost::system::system_error& err) {
                    if (err.code() != asio::error::operation_aborted)
                        log_.error("task '{}' failed: {}", it->name, err.what());
                } catch (const std::exception& err) {
                    log_.error("task '{}' failed: {}", it->name, err.what());
                } catch (...) {
                    log_.error("task '{}' failed with an unknown exception", it->name);
                }
            }
            finish(it);
        }));
    if (cancel_now) cancel_all();
}

void service::finish(std::list<task>::iterator it) {
    std::lock_guard lock(mutex_);
    tasks_.erase(it);
    changed_.notify_all();
}

std::size_t service::active_tasks() const {
    std::lock_guard lock(mutex_);
    return tasks_.size();
}

void service::on_shutdown(std::function<void()> hook) {
    std::lock_guard lock(mutex_);
    hooks_.push_back(std::move(hook));
}

void service::on_drained(std::size_t thread, std::function<void()> hook) {
    if (thread >= contexts_.size())
        throw std::out_of_range("service::on_drained: no thread " + std::to_string(thread));
    std::lock_guard lock(mutex_);
    drained_hooks_.emplace_back(thread, std::move(hook));
}

void service::run_drained_hooks() {
    std::vector<std::pair<std::size_t, std::function<void()>>> hooks;
    {
        std::lock_guard lock(mutex_);
        hooks.swap(drained_hooks_);
    }
    for (auto& [thread, hook] : hooks) {
        std::promise<void> done;
        asio::post(*contexts_[thread], [&] {
            try {
                hook();
            } catch (const std::exception& e) {
                log_.error("a shutdown hook failed: {}", e.what());
            }
            done.set_value();
        });
        done.get_future().wait();
    }
}

void service::stop() {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
    changed_.notify_all();
}

void service::cancel_all() {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    for (auto& t : tasks_) {
        // Emit on the task's own thread: cancellation slots are not thread-safe. finish()
        // runs there too, so a task found in the list stays alive during emit().
        asio::post(t.executor, [this, id = t.id] {
            asio::cancellation_signal* signal = nullptr;
            {
                std::lock_guard lock(mutex_);
                for (auto& candidate : tasks_)
                    if (candidate.id == id) signal = &candidate.signal;
            }
            if (signal) signal->emit(asio::cancellation_type::terminal);
        });
    }
}

bool service::wait_tasks_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_until(lock, deadline, [&] { return tasks_.empty(); });
}

int service::run() {
    using work_guard = asio::executor_work_guard<asio::io_context::executor_type>;
    std::vector<work_guard> guards;
    for (auto& ctx : contexts_) guards.emplace_back(ctx->get_executor());

    std::optional<asio::signal_set> signals;
    if (options_.handle_signals) {
        signals.emplace(*contexts_.front(), SIGINT, SIGTERM);
        signals->async_wait([this](error_code ec, int signo) {
            if (ec) return;
            log_.info("received signal {}, shutting down", signo);
            stop();
        });
    }

    std::vector<std::jthread> threads;
    for (auto& ctx : contexts_) {
        threads.emplace_back([this, &ctx] {
            for (;;) {
                try {
                    ctx->run();
                    return;
                } catch (const std::exception& e) {
                    log_.error("unhandled exception on an io thread: {}", e.what());
                }
            }
        });
    }
    log_.info("running with {} thread(s)", contexts_.size());

    std::vector<std::function<void()>> hooks;
    {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stop_requested_; });
        stopping_ = true;
        hooks.swap(hooks_);
    }
    for (auto& hook : hooks) hook();

    auto now = std::chrono::steady_clock::now();
    if (!wait_tasks_until(now + options_.drain_timeout)) {
        log_.warn("drain deadline passed with {} task(s) still running; cancelling them",
                  active_tasks());
        cancel_all();
        if (!wait_tasks_until(std::chrono::steady_clock::now() + options_.cancel_grace))
            log_.error("{} task(s) did not stop after cancellation; abandoning them",
                       active_tasks());
    }

    run_drained_hooks();
    guards.clear();
    for (auto& ctx : contexts_) ctx->stop();
    threads.clear();
    log_.info("stopped");
    return 0;
}

}  // namespace keel
