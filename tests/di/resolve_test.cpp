// Resolution by type: constructor injection, interface binding, factories, instances,
// replacement, singleton identity across threads and destruction order.

#include <gtest/gtest.h>

#include <atomic>
#include <keel/di/container.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace di_test {

// Records constructions and destructions, so tests can check identity and order.
struct event_log {
    std::vector<std::string> events;
    void add(std::string event) { events.push_back(std::move(event)); }
};

struct config {
    std::string url = "redis://localhost";
};

struct repository {
    using inject = keel::di::inject<config&, event_log&>;
    repository(config& c, event_log& log) : cfg(c), log(log) { log.add("+repository"); }
    ~repository() { log.add("-repository"); }
    config& cfg;
    event_log& log;
};

struct service {
    using inject = keel::di::inject<repository&, const config&, event_log&>;
    service(repository& r, const config& c, event_log& log) : repo(r), cfg(c), log(log) {
        log.add("+service");
    }
    ~service() { log.add("-service"); }
    repository& repo;
    const config& cfg;
    event_log& log;
};

struct gateway {
    virtual ~gateway() = default;
    virtual std::string name() const = 0;
};

struct real_gateway : gateway {
    using inject = keel::di::inject<config&>;
    explicit real_gateway(config& c) : url(c.url) {}
    std::string name() const override { return "real " + url; }
    std::string url;
};

struct fake_gateway : gateway {
    std::string name() const override { return "fake"; }
};

struct broken {
    using inject = keel::di::inject<repository&>;
    explicit broken(repository&) { throw std::runtime_error("connection refused"); }
};

struct mailer {
    mailer(repository& r, gateway& g) : repo(r), gw(g) {}
    repository& repo;
    gateway& gw;
};

}  // namespace di_test

namespace {

using namespace di_test;

keel::di::registry base_registry(event_log& log) {
    keel::di::registry reg;
    reg.instance(std::ref(log))
        .singleton<config>()
        .singleton<repository>()
        .singleton<service>()
        .singleton<gateway, real_gateway>();
    return reg;
}

TEST(di_resolve, constructs_a_type_with_its_declared_dependencies) {
    event_log log;
    keel::di::container c = base_registry(log).build();
    service& svc = c.get<service>();
    EXPECT_EQ(&svc.repo, &c.get<repository>());
    EXPECT_EQ(&svc.cfg, &c.get<config>());
    EXPECT_EQ(&svc.repo.cfg, &c.get<config>());
    EXPECT_EQ(&c.get<const service>(), &svc);
    EXPECT_TRUE(c.contains<service>());
    EXPECT_FALSE(c.contains<mailer>());
}

TEST(di_resolve, binds_an_interface_to_its_implementation) {
    event_log log;
    keel::di::container c = base_registry(log).build();
    gateway& gw = c.get<gateway>();
    EXPECT_EQ(gw.name(), "real redis://localhost");
    EXPECT_NE(dynamic_cast<real_gateway*>(&gw), nullptr);
    EXPECT_FALSE(c.contains<real_gateway>());  // only the interface is registered
}

TEST(di_resolve, factory_dependencies_are_deduced_from_its_parameters) {
    event_log log;
    auto reg = base_registry(log);
    reg.singleton<mailer>([](repository& r, gateway& g) { return std::make_unique<mailer>(r, g); });
    keel::di::container c = reg.build();
    mailer& m = c.get<mailer>();
    EXPECT_EQ(&m.repo, &c.get<repository>());
    EXPECT_EQ(&m.gw, &c.get<gateway>());
}

std::shared_ptr<gateway> make_gateway(config&) {
    return std::make_shared<fake_gateway>();
}

TEST(di_resolve, factories_may_return_a_value_a_shared_ptr_or_be_functions) {
    keel::di::registry reg;
    reg.singleton<config>([]() { return config{"by value"}; })
        .singleton<gateway>(&make_gateway)
        .singleton<int>([](config& c) { return static_cast<int>(c.url.size()); });
    keel::di::container c = reg.build();
    EXPECT_EQ(c.get<config>().url, "by value");
    EXPECT_EQ(c.get<gateway>().name(), "fake");
    EXPECT_EQ(c.get<int>(), 8);
}

TEST(di_resolve, a_factory_may_resolve_from_the_container) {
    keel::di::registry reg;
    reg.singleton<config>().singleton<std::string>(
        [](keel::di::container& c) { return c.get<config>().url + "/0"; });
    keel::di::container c = reg.build();
    EXPECT_EQ(c.get<std::string>(), "redis://localhost/0");
}

TEST(di_resolve, a_null_factory_result_fails_the_build_naming_the_type) {
    keel::di::registry reg;
    reg.singleton<config>([]() { return std::unique_ptr<config>(); });
    try {
        (void)reg.build();
        FAIL() << "build() accepted a null factory result";
    } catch (const keel::di::error& e) {
        EXPECT_STREQ(e.what(), "the factory for di_test::config returned a null pointer");
    }
}

TEST(di_resolve, instances_are_shared_or_borrowed) {
    auto shared = std::make_shared<config>(config{"shared"});
    fake_gateway borrowed;
    keel::di::registry reg;
    reg.instance(shared).instance<gateway>(std::ref(borrowed));
    keel::di::container c = reg.build();
    EXPECT_EQ(&c.get<config>(), shared.get());
    EXPECT_EQ(&c.get<gateway>(), &borrowed);
    std::weak_ptr<config> watch = shared;
    shared.reset();
    EXPECT_FALSE(watch.expired());  // the container holds it
    c = keel::di::container();
    reg = keel::di::registry();
    EXPECT_TRUE(watch.expired());
}

TEST(di_resolve, replace_swaps_a_registration_for_a_fake) {
    event_log log;
    auto reg = base_registry(log);
    reg.replace<gateway>([]() { return std::make_unique<fake_gateway>(); });
    EXPECT_EQ(reg.build().get<gateway>().name(), "fake");

    auto fake_config = std::make_shared<config>(config{"redis://fake"});
    reg.replace(fake_config);
    keel::di::container c = reg.build();
    EXPECT_EQ(&c.get<repository>().cfg, fake_config.get());

    fake_gateway borrowed;
    reg.replace<gateway>(std::ref(borrowed));
    EXPECT_EQ(&reg.build().get<gateway>(), &borrowed);
}

TEST(di_resolve, get_reports_unregistered_types) {
    event_log log;
    keel::di::container c = base_registry(log).build();
    EXPECT_THROW(
        {
            try {
                c.get<mailer>();
            } catch (const keel::di::error& e) {
                EXPECT_STREQ(e.what(), "di_test::mailer is not registered");
                throw;
            }
        },
        keel::di::error);
    EXPECT_THROW(keel::di::container().get<config>(), keel::di::error);
}

// Every singleton is built by build(), before any thread can ask for it; get() is then a
// read-only lookup. Many threads racing on get() all see the one object.
TEST(di_resolve, singletons_are_constructed_once_and_shared_across_threads) {
    static std::atomic<int> constructed{0};
    struct counted {
        counted() { ++constructed; }
    };
    constructed = 0;
    keel::di::registry reg;
    reg.singleton<counted>().singleton<config>();
    keel::di::container c = reg.build();
    EXPECT_EQ(constructed.load(), 1);

    constexpr int threads = 8;
    std::vector<const counted*> seen(threads);
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            ++ready;
            while (ready.load() < threads) {
            }
            keel::di::container copy = c;  // handles are copied freely across threads
            for (int i = 0; i < 1000; ++i) seen[t] = &copy.get<counted>();
        });
    }
    for (auto& th : pool) th.join();
    for (const counted* p : seen) EXPECT_EQ(p, &c.get<counted>());
    EXPECT_EQ(constructed.load(), 1);
}

TEST(di_resolve, singletons_are_destroyed_in_reverse_order_of_construction) {
    event_log log;
    {
        keel::di::registry reg;
        // Registered dependents first: construction still follows the dependencies.
        reg.singleton<service>().singleton<repository>().singleton<config>().instance(
            std::ref(log));
        keel::di::container c = reg.build();
        keel::di::container copy = c;
        c = keel::di::container();
        EXPECT_EQ(log.events, (std::vector<std::string>{"+repository", "+service"}));
    }
    EXPECT_EQ(log.events,
              (std::vector<std::string>{"+repository", "+service", "-service", "-repository"}));
}

TEST(di_resolve, a_throwing_constructor_fails_the_build_and_unwinds_what_was_built) {
    event_log log;
    auto reg = base_registry(log);
    reg.singleton<broken>();
    try {
        (void)reg.build();
        FAIL() << "build() did not rethrow";
    } catch (const keel::di::error& e) {
        EXPECT_STREQ(e.what(), "constructing di_test::broken failed: connection refused");
        EXPECT_THROW(std::rethrow_if_nested(e), std::runtime_error);
    }
    EXPECT_EQ(log.events,
              (std::vector<std::string>{"+repository", "+service", "-service", "-repository"}));
}

}  // namespace
