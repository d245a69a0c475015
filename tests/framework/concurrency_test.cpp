// Semantics of nurseries, join handles, cancellation tokens and the combinators, run on the
// deterministic test scheduler (virtual time: a one-hour sleep takes no real time).

#include <gtest/gtest.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/framework/concurrency.hpp>
#include <keel/framework/concurrency/test_executor.hpp>
#include <keel/test/run.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace kc = keel::concurrency;
using asio::awaitable;
using kc::nursery;

// Sets a flag when the coroutine frame is destroyed, however it ends.
struct set_on_exit {
    bool& flag;
    ~set_on_exit() { flag = true; }
};

awaitable<int> value_after(keel::duration d, int value) {
    co_await kc::sleep_for(d);
    co_return value;
}

awaitable<void> fail_after(keel::duration d, std::string message) {
    co_await kc::sleep_for(d);
    throw std::runtime_error(message);
}

awaitable<void> sleep_then_flag(keel::duration d, bool& cleaned) {
    set_on_exit guard{cleaned};
    co_await kc::sleep_for(d);
}

// A task that, once cancelled, takes `cleanup` (virtual) time to stop, then fails with a
// different error that must be suppressed.
awaitable<void> slow_to_stop(keel::duration cleanup, bool& cleaned) {
    std::exception_ptr error;
    try {
        co_await kc::sleep_for(24h);
    } catch (...) {
        error = std::current_exception();
    }
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await kc::uncancellable(kc::sleep_for(cleanup));
    cleaned = true;
    throw std::logic_error("error raised while cancelled");
}

class concurrency : public ::testing::Test {
  protected:
    keel::time_point now() { return sched.clock().now(); }

    kc::test_scheduler sched{42};
};

TEST_F(concurrency, nursery_waits_for_every_child) {
    auto start = now();
    int result = sched.run(kc::open_nursery([](nursery& n) -> awaitable<int> {
        n.spawn(value_after(3s, 1));
        n.spawn(value_after(7s, 2));
        co_return co_await value_after(1s, 40) + 2;
    }));
    EXPECT_EQ(result, 42);
    EXPECT_EQ(now() - start, 7s);
}

TEST_F(concurrency, first_error_wins_and_siblings_cleanup_ran) {
    bool sleeper_cleaned = false, slow_cleaned = false;
    auto start = now();
    try {
        sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
            n.spawn(sleep_then_flag(1h, sleeper_cleaned));
            n.spawn(slow_to_stop(5s, slow_cleaned));
            n.spawn(fail_after(2s, "first"));
            n.spawn(fail_after(3s, "second"));
            co_await kc::sleep_for(1h);
        }));
        FAIL() << "the nursery did not fail";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "first");
    }
    EXPECT_TRUE(sleeper_cleaned);
    EXPECT_TRUE(slow_cleaned);
    // The nursery waited for the slow sibling's cleanup before raising.
    EXPECT_EQ(now() - start, 2s + 5s);
}

TEST_F(concurrency, body_failure_cancels_children) {
    bool cleaned = false;
    EXPECT_THROW(sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        n.spawn(sleep_then_flag(1h, cleaned));
        co_await kc::sleep_for(1s);
        throw std::invalid_argument("body");
    })),
                 std::invalid_argument);
    EXPECT_TRUE(cleaned);
}

TEST_F(concurrency, nursery_cancel_from_inside_ends_normally) {
    bool cleaned = false;
    int result = sched.run(kc::open_nursery([&](nursery& n) -> awaitable<int> {
        n.spawn(sleep_then_flag(1h, cleaned));
        co_await kc::sleep_for(1s);
        n.cancel();
        co_return 7;
    }));
    EXPECT_EQ(result, 7);
    EXPECT_TRUE(cleaned);
}

awaitable<void> inner_nursery(std::array<bool, 3>& cleaned) {
    co_await kc::open_nursery([&](nursery& n) -> awaitable<void> {
        for (std::size_t i = 0; i < cleaned.size(); ++i) n.spawn(sleep_then_flag(1h, cleaned[i]));
        co_await kc::sleep_for(1h);
    });
}

TEST_F(concurrency, cancelling_an_outer_nursery_cancels_nested_ones) {
    std::array<bool, 3> cleaned{};
    bool inner_was_cancelled = false;
    auto start = now();
    sched.run(kc::open_nursery([&](nursery& outer) -> awaitable<void> {
        auto h = outer.spawn(inner_nursery(cleaned));
        co_await kc::sleep_for(10s);
        outer.cancel();
        try {
            co_await asio::this_coro::throw_if_cancelled(false);
            co_await h.join();
        } catch (const kc::cancelled_error&) {
            inner_was_cancelled = true;
        }
    }));
    EXPECT_EQ(cleaned, (std::array<bool, 3>{true, true, true}));
    EXPECT_TRUE(inner_was_cancelled);
    EXPECT_EQ(now() - start, 10s);
}

TEST_F(concurrency, cancelling_the_awaiting_coroutine_cancels_the_nursery) {
    bool cleaned = false;
    auto winner = sched.run(kc::race(kc::open_nursery([&](nursery& n) -> awaitable<void> {
                                         n.spawn(sleep_then_flag(1h, cleaned));
                                         co_await kc::sleep_for(1h);
                                     }),
                                     kc::sleep_for(1s)));
    EXPECT_EQ(winner.index(), 1u);
    EXPECT_TRUE(cleaned);
}

TEST_F(concurrency, parent_token_cancels_the_nursery) {
    kc::cancel_source source;
    bool cleaned = false;
    EXPECT_THROW(sched.run(kc::open_nursery(
                     [&](nursery& n) -> awaitable<void> {
                         n.spawn(sleep_then_flag(1h, cleaned));
                         n.spawn([&]() -> awaitable<void> {
                             co_await kc::sleep_for(1s);
                             source.cancel();
                         });
                         co_await kc::sleep_for(1h);
                     },
                     {.parent = source.token()})),
                 kc::cancelled_error);
    EXPECT_TRUE(cleaned);
}

TEST_F(concurrency, spawn_limit_gives_a_clear_error) {
    sched.run(kc::open_nursery(
        [&](nursery& n) -> awaitable<void> {
            n.spawn(kc::sleep_for(1s));
            n.spawn(kc::sleep_for(2s));
            try {
                n.spawn(kc::sleep_for(3s));
                ADD_FAILURE() << "the third spawn succeeded";
            } catch (const kc::spawn_limit_error& e) {
                EXPECT_EQ(e.limit(), 2u);
                EXPECT_NE(std::string(e.what()).find("spawn limit of 2"), std::string::npos);
            }
            co_await kc::sleep_for(1500ms);
            n.spawn(kc::sleep_for(1s));  // one finished: there is room again
        },
        {.max_children = 2}));
}

TEST_F(concurrency, a_task_spawned_into_a_cancelled_nursery_does_not_run) {
    bool ran = false;
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        n.cancel();
        auto h = n.spawn([&]() -> awaitable<void> {
            co_await kc::sleep_for(1s);
            ran = true;
        });
        (void)h;
        co_return;
    }));
    EXPECT_FALSE(ran);
}

TEST_F(concurrency, join_returns_value_rethrows_error_and_reports_cancellation) {
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        auto value = n.spawn(value_after(1s, 5));
        CO_ASSERT_TRUE(co_await value.join() == 5);
        CO_ASSERT_TRUE(value.status() == kc::task_status::succeeded);

        auto cancelled = n.spawn(value_after(1h, 6));
        cancelled.cancel();
        bool threw = false;
        try {
            co_await cancelled.join();
        } catch (const kc::cancelled_error&) {
            threw = true;
        }
        CO_ASSERT_TRUE(threw);
        CO_ASSERT_TRUE(cancelled.status() == kc::task_status::cancelled);
    }));

    // A failed task's error reaches its joiner, and the nursery fails with it too.
    std::string joined;
    EXPECT_THROW(sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        auto failing = n.spawn(fail_after(1s, "boom"));
        try {
            co_await failing.join();
        } catch (const std::runtime_error& e) {
            joined = e.what();
        }
    })),
                 std::runtime_error);
    EXPECT_EQ(joined, "boom");
}

TEST_F(concurrency, joining_a_finished_task_returns_at_once) {
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        auto h = n.spawn(value_after(1s, 9));
        co_await kc::sleep_for(2s);
        CO_ASSERT_TRUE(h.done());
        auto steps = sched.steps();
        int v = co_await h.join();
        CO_ASSERT_TRUE(v == 9);
        CO_ASSERT_TRUE(sched.steps() == steps);  // no suspension: nothing else ran
    }));
}

TEST_F(concurrency, cancellation_tokens_form_a_tree) {
    kc::cancel_source root;
    kc::cancel_source child(root.token());
    kc::cancel_source grandchild(child.token());
    kc::cancel_source sibling(root.token());
    int calls = 0, dropped_calls = 0;
    kc::cancel_registration on_grandchild(grandchild.token(),
                                          [&](asio::cancellation_type) { ++calls; });
    {
        kc::cancel_registration dropped(grandchild.token(),
                                        [&](asio::cancellation_type) { ++dropped_calls; });
    }

    child.cancel();
    EXPECT_TRUE(child.cancelled());
    EXPECT_TRUE(grandchild.cancelled());
    EXPECT_FALSE(root.cancelled());
    EXPECT_FALSE(sibling.cancelled());
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(dropped_calls, 0);

    root.cancel();
    child.cancel();
    EXPECT_TRUE(sibling.cancelled());
    EXPECT_EQ(calls, 1);

    // A child of an already cancelled node starts cancelled; a late registration runs at once.
    kc::cancel_source late(child.token());
    EXPECT_TRUE(late.cancelled());
    kc::cancel_registration immediate(late.token(), [&](asio::cancellation_type) { ++calls; });
    EXPECT_EQ(calls, 2);
    EXPECT_FALSE(kc::cancel_token().cancelled());
}

TEST_F(concurrency, token_cancellation_reaches_a_pending_operation) {
    kc::cancel_source source;
    auto start = now();
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        n.spawn([&]() -> awaitable<void> {
            co_await kc::sleep_for(2s);
            source.cancel();
        });
        bool cancelled = false;
        try {
            co_await kc::with_cancellation(source.token(), kc::sleep_for(1h));
        } catch (const kc::cancelled_error&) {
            cancelled = true;
        }
        CO_ASSERT_TRUE(cancelled);
    }));
    EXPECT_EQ(now() - start, 2s);
}

TEST_F(concurrency, a_source_under_a_nursery_token_is_cancelled_with_it) {
    kc::cancel_token observed;
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        kc::cancel_source mine(n.token());
        observed = mine.token();
        n.cancel();
        co_return;
    }));
    EXPECT_TRUE(observed.cancelled());
}

TEST_F(concurrency, race_returns_the_first_and_waits_for_a_slow_loser) {
    bool loser_cleaned = false;
    auto start = now();
    auto winner = sched.run(kc::race(value_after(1s, 1), slow_to_stop(4s, loser_cleaned)));
    ASSERT_EQ(winner.index(), 0u);
    EXPECT_EQ(std::get<0>(winner), 1);
    // The loser's error is suppressed, and race returned only after it stopped.
    EXPECT_TRUE(loser_cleaned);
    EXPECT_EQ(now() - start, 1s + 4s);
}

TEST_F(concurrency, race_rethrows_a_failed_winner) {
    EXPECT_THROW(sched.run(kc::race(fail_after(1s, "x"), value_after(2s, 2))), std::runtime_error);
}

TEST_F(concurrency, all_returns_every_value_or_fails_fast) {
    auto [a, b, c] = sched.run(kc::all(value_after(2s, 1), value_after(1s, 2), kc::sleep_for(3s)));
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 2);
    (void)c;

    bool cleaned = false;
    auto start = now();
    EXPECT_THROW(sched.run(kc::all(sleep_then_flag(1h, cleaned), fail_after(1s, "fast"))),
                 std::runtime_error);
    EXPECT_TRUE(cleaned);
    EXPECT_EQ(now() - start, 1s);
}

TEST_F(concurrency, any_returns_the_first_success) {
    auto first = sched.run(kc::any(fail_after(1s, "a"), value_after(2s, 2), value_after(3s, 3)));
    ASSERT_EQ(first.index(), 1u);
    EXPECT_EQ(std::get<1>(first), 2);

    try {
        sched.run(kc::any(fail_after(1s, "a"), fail_after(2s, "b")));
        FAIL() << "any() did not fail";
    } catch (const kc::any_error& e) {
        ASSERT_EQ(e.errors().size(), 2u);
    }
}

TEST_F(concurrency, all_settled_reports_every_outcome) {
    auto [ok, failed] = sched.run(kc::all_settled(value_after(1s, 4), fail_after(2s, "no")));
    ASSERT_TRUE(ok.has_value());
    EXPECT_EQ(*ok, 4);
    ASSERT_FALSE(failed.has_value());
    EXPECT_THROW(std::rethrow_exception(failed.error()), std::runtime_error);
}

TEST_F(concurrency, timeout_returns_the_value_or_timed_out) {
    auto fast = sched.run(kc::timeout(2s, value_after(1s, 8)));
    ASSERT_TRUE(fast.has_value());
    EXPECT_EQ(*fast, 8);

    bool cleaned = false;
    auto start = now();
    auto slow = sched.run(kc::timeout(2s, sleep_then_flag(1h, cleaned)));
    ASSERT_FALSE(slow.has_value());
    EXPECT_EQ(slow.error().after, 2s);
    EXPECT_TRUE(cleaned);
    EXPECT_EQ(now() - start, 2s);
}

awaitable<void> section(keel::duration d, bool& done) {
    co_await kc::sleep_for(d);
    done = true;
}

TEST_F(concurrency, uncancellable_section_runs_to_the_end) {
    bool done = false, next_await_threw = false;
    auto start = now();
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        auto h = n.spawn([&]() -> awaitable<void> {
            co_await kc::uncancellable(section(5s, done));
            try {
                co_await kc::sleep_for(1s);
            } catch (const boost::system::system_error&) {
                next_await_threw = true;  // the cancellation arrives after the section
                throw;
            }
        });
        co_await kc::sleep_for(1s);
        h.cancel();
    }));
    EXPECT_TRUE(done);
    EXPECT_TRUE(next_await_threw);
    EXPECT_EQ(now() - start, 5s);
}

TEST_F(concurrency, run_on_moves_work_to_another_executor_explicitly) {
    asio::io_context other;
    asio::io_context worker;
    auto guard = asio::make_work_guard(worker);
    std::thread thread([&] { worker.run(); });
    auto on_worker = [&]() -> awaitable<int> {
        co_return worker.get_executor().running_in_this_thread() ? 11 : 0;
    };
    auto result = keel::test::run(other, [&]() -> awaitable<int> {
        auto work = on_worker();
        co_return co_await kc::run_on(worker.get_executor(), std::move(work));
    }());
    guard.reset();
    thread.join();
    EXPECT_EQ(result, 11);
}

// The same semantics on a real io_context and the system clock, where a task's coroutine
// starts inside spawn() and joins complete without a scheduler in between.

awaitable<void> cancel_then_return(nursery& n) {
    n.cancel();
    co_return;
}

awaitable<void> fail_at_once() {
    throw std::runtime_error("failed before suspending");
    co_return;
}

TEST(real_io_nursery, children_run_join_and_are_cancelled) {
    asio::io_context io;
    keel::test::run(io, [&]() -> awaitable<void> {
        bool slept_cleaned = false;
        kc::join_handle<void> sleeper;
        auto started = std::chrono::steady_clock::now();
        co_await kc::open_nursery([&](nursery& n) -> awaitable<void> {
            auto a = n.spawn(value_after(1ms, 1));
            auto b = n.spawn(value_after(2ms, 2));
            sleeper = n.spawn(sleep_then_flag(1h, slept_cleaned));
            int sum = co_await a.join();
            sum += co_await b.join();
            CO_ASSERT_TRUE(sum == 3);
            n.cancel();
        });
        CO_ASSERT_TRUE(slept_cleaned);
        CO_ASSERT_TRUE(sleeper.status() == kc::task_status::cancelled);
        CO_ASSERT_TRUE(std::chrono::steady_clock::now() - started < 10s);
    }());
}

TEST(real_io_nursery, a_task_that_cancels_its_nursery_without_suspending) {
    asio::io_context io;
    keel::test::run(io, [&]() -> awaitable<void> {
        bool cleaned = false;
        bool late_ran = false;
        co_await kc::open_nursery([&](nursery& n) -> awaitable<void> {
            n.spawn(sleep_then_flag(1h, cleaned));
            auto h = n.spawn(cancel_then_return(n));
            // Spawned into a cancelled nursery: cancelled at its first co_await.
            n.spawn([&]() -> awaitable<void> {
                co_await kc::sleep_for(0s);
                late_ran = true;
            });
            co_await h.join();
        });
        CO_ASSERT_TRUE(cleaned);
        CO_ASSERT_TRUE(!late_ran);
    }());
}

TEST(real_io_nursery, a_body_that_cancels_its_nursery_then_awaits_is_cancelled) {
    asio::io_context io;
    keel::test::run(io, [&]() -> awaitable<void> {
        bool body_cancelled = false;
        co_await kc::open_nursery([&](nursery& n) -> awaitable<void> {
            n.cancel();
            try {
                co_await kc::sleep_for(1h);
            } catch (const boost::system::system_error& e) {
                body_cancelled = e.code() == asio::error::operation_aborted;
                throw;
            }
        });
        CO_ASSERT_TRUE(body_cancelled);
    }());
}

TEST(real_io_nursery, a_child_failing_before_it_suspends_fails_the_nursery) {
    asio::io_context io;
    keel::test::run(io, [&]() -> awaitable<void> {
        bool cleaned = false;
        std::string error;
        try {
            co_await kc::open_nursery([&](nursery& n) -> awaitable<void> {
                n.spawn(sleep_then_flag(1h, cleaned));
                auto h = n.spawn(fail_at_once());
                co_await h.join();
            });
        } catch (const std::runtime_error& e) {
            error = e.what();
        }
        CO_ASSERT_TRUE(error == "failed before suspending");
        CO_ASSERT_TRUE(cleaned);
    }());
}

TEST(real_io_nursery, joins_can_be_cancelled_and_shared) {
    asio::io_context io;
    keel::test::run(io, [&]() -> awaitable<void> {
        co_await kc::open_nursery([&](nursery& n) -> awaitable<void> {
            auto slow = n.spawn(value_after(1h, 7));
            auto r = co_await kc::race(slow.join(), kc::sleep_for(1ms));
            CO_ASSERT_TRUE(r.index() == 1);
            CO_ASSERT_TRUE(!slow.done());

            // Two joiners: the first to wait gets the value, the other finds it taken.
            auto v = n.spawn(value_after(1ms, 5));
            int first = 0;
            auto other = n.spawn([&]() -> awaitable<void> { first = co_await v.join(); });
            bool second_saw_taken = false;
            try {
                co_await v.join();
            } catch (const std::logic_error&) {
                second_saw_taken = true;
            }
            co_await other.join();
            CO_ASSERT_TRUE(first == 5);
            CO_ASSERT_TRUE(second_saw_taken);
            slow.cancel();
            bool cancelled = false;
            try {
                co_await slow.join();
            } catch (const kc::cancelled_error&) {
                cancelled = true;
            }
            CO_ASSERT_TRUE(cancelled);
        });
    }());
}

// Both ways a task is launched (co_spawn with the slot bound, and the launch without co_spawn's
// proxy used on Boost 1.81) give the coroutine the slot: an emission reaches a pending Asio
// timer at once, and a cancellation state the coroutine resets still hears it.
template <class Launch>
void check_launch_in_slot(Launch launch) {
    asio::io_context io;
    asio::cancellation_signal signal;
    boost::system::error_code first, second;
    bool completed = false;
    auto body = [&]() -> awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 1h);
        std::tie(first) = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        timer.expires_after(1h);
        std::tie(second) = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    };
    launch(
        io.get_executor(), body(), [&](std::exception_ptr e) { completed = !e; }, signal.slot());
    asio::steady_timer step(io);
    auto at = [&](auto when, auto what) {
        step.expires_after(when);
        step.wait();
        what();
        io.poll();
    };
    io.poll();
    at(1ms, [&] { signal.emit(asio::cancellation_type::terminal); });
    EXPECT_EQ(first, asio::error::operation_aborted);
    EXPECT_FALSE(completed);
    at(1ms, [&] { signal.emit(asio::cancellation_type::total); });
    EXPECT_EQ(second, asio::error::operation_aborted);
    EXPECT_TRUE(completed);
}

TEST(real_io_nursery, a_task_launched_either_way_hears_its_slot) {
    check_launch_in_slot([](auto&&... args) {
        kc::detail::co_spawn_in_slot(std::forward<decltype(args)>(args)...);
    });
    check_launch_in_slot(
        [](auto&&... args) { kc::detail::spawn_in_slot(std::forward<decltype(args)>(args)...); });
}

}  // namespace
