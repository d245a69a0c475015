// Lifecycles in the object graph: singletons with start()/stop() are started dependencies
// first and stopped in the reverse order; a failed start stops what had started; the last
// handle stops what is still running; instances are left to their owner.

#include <gtest/gtest.h>

#include <keel/di/container.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using keel::di::inject;
using keel::di::registry;

struct journal {
    std::vector<std::string> events;
};

struct database {
    using inject = keel::di::inject<journal&>;
    explicit database(journal& j) : log(j) {}
    void start() { log.events.push_back("start database"); }
    void stop() { log.events.push_back("stop database"); }
    journal& log;
};

// No lifecycle of its own, between two that have one.
struct repository {
    using inject = keel::di::inject<database&>;
    explicit repository(database&) {}
};

struct cache_warmer {
    using inject = keel::di::inject<journal&, repository&>;
    cache_warmer(journal& j, repository&) : log(j) {}
    void start() {
        if (fail) throw std::runtime_error("cache unreachable");
        log.events.push_back("start warmer");
    }
    void stop() { log.events.push_back("stop warmer"); }
    journal& log;
    static inline bool fail = false;
};

struct notifier {
    virtual ~notifier() = default;
};
struct mail_notifier : notifier {
    using inject = keel::di::inject<journal&>;
    explicit mail_notifier(journal& j) : log(j) {}
    void start() { log.events.push_back("start mail"); }
    journal& log;
};

// Only stops (flushes), from a factory.
struct flusher {
    explicit flusher(journal& j) : log(j) {}
    void stop() { log.events.push_back("flush"); }
    journal& log;
};

// Registered as an instance: the caller starts and stops it.
struct owned_elsewhere {
    void start() { started = true; }
    void stop() { stopped = true; }
    bool started = false;
    bool stopped = false;
};

registry services(journal& j, owned_elsewhere& other) {
    registry r;
    // Registered in an order unlike the dependency order.
    r.singleton<cache_warmer>()
        .singleton<repository>()
        .singleton<notifier, mail_notifier>()
        .singleton<flusher>([](journal& log) { return std::make_unique<flusher>(log); })
        .singleton<database>()
        .instance(std::ref(j))
        .instance(std::ref(other));
    return r;
}

TEST(lifecycle, starts_dependencies_first_and_stops_in_reverse) {
    journal j;
    owned_elsewhere other;
    auto c = services(j, other).build();
    EXPECT_TRUE(j.events.empty());  // build() constructs, start() starts
    c.start();
    auto started = j.events;
    ASSERT_EQ(started.size(), 3u);
    auto at = [&](const std::string& e) {
        return std::find(started.begin(), started.end(), e) - started.begin();
    };
    EXPECT_LT(at("start database"), at("start warmer"));
    EXPECT_NE(at("start mail"), 3);
    j.events.clear();
    c.stop();
    ASSERT_EQ(j.events.size(), 3u);
    auto stopped = j.events;
    auto stop_at = [&](const std::string& e) {
        return std::find(stopped.begin(), stopped.end(), e) - stopped.begin();
    };
    EXPECT_LT(stop_at("stop warmer"), stop_at("stop database"));
    EXPECT_NE(stop_at("flush"), 3);
    EXPECT_FALSE(other.started);
    EXPECT_FALSE(other.stopped);
    j.events.clear();
    c.stop();  // nothing left to stop
    EXPECT_TRUE(j.events.empty());
}

TEST(lifecycle, a_failed_start_stops_what_had_started_and_names_the_type) {
    journal j;
    owned_elsewhere other;
    auto c = services(j, other).build();
    cache_warmer::fail = true;
    try {
        c.start();
        ADD_FAILURE() << "start() did not throw";
    } catch (const keel::di::error& e) {
        EXPECT_NE(std::string(e.what()).find("cache_warmer"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("cache unreachable"), std::string::npos);
    }
    cache_warmer::fail = false;
    // Everything that started before the warmer was stopped again.
    EXPECT_NE(std::find(j.events.begin(), j.events.end(), "start database"), j.events.end());
    EXPECT_NE(std::find(j.events.begin(), j.events.end(), "stop database"), j.events.end());
    EXPECT_EQ(std::find(j.events.begin(), j.events.end(), "stop warmer"), j.events.end());
}

TEST(lifecycle, the_last_handle_stops_what_is_still_started) {
    journal j;
    owned_elsewhere other;
    {
        auto c = services(j, other).build();
        auto copy = c;
        c.start();
        j.events.clear();
    }
    EXPECT_NE(std::find(j.events.begin(), j.events.end(), "stop database"), j.events.end());
    EXPECT_NE(std::find(j.events.begin(), j.events.end(), "flush"), j.events.end());
}

TEST(lifecycle, start_twice_is_an_error) {
    journal j;
    owned_elsewhere other;
    auto c = services(j, other).build();
    c.start();
    EXPECT_THROW(c.start(), keel::di::error);
}

}  // namespace
