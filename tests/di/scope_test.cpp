// Per-request scopes: one object per scope, dependencies on singletons and on the scope,
// reverse-order destruction, and handles that outlive the container.

#include <gtest/gtest.h>

#include <keel/di/container.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace di_test {

struct trail {
    std::vector<std::string> events;
};

struct database {
    int queries = 0;
};

struct request_context {
    using inject = keel::di::inject<trail&>;
    explicit request_context(trail& t) : log(t) { log.events.push_back("+context"); }
    ~request_context() { log.events.push_back("-context"); }
    trail& log;
};

struct unit_of_work {
    using inject = keel::di::inject<database&, request_context&, trail&>;
    unit_of_work(database& d, request_context& c, trail& t) : db(d), ctx(c), log(t) {
        log.events.push_back("+unit_of_work");
    }
    ~unit_of_work() { log.events.push_back("-unit_of_work"); }
    database& db;
    request_context& ctx;
    trail& log;
};

struct handler {
    virtual ~handler() = default;
    virtual unit_of_work& work() = 0;
};

struct scoped_handler : handler {
    using inject = keel::di::inject<keel::di::scope&>;
    explicit scoped_handler(keel::di::scope& s) : owner(s) {}
    unit_of_work& work() override { return owner.get<unit_of_work>(); }
    keel::di::scope& owner;
};

}  // namespace di_test

namespace {

using namespace di_test;

keel::di::registry request_registry(trail& log) {
    keel::di::registry reg;
    reg.instance(std::ref(log))
        .singleton<database>()
        .per_request<request_context>()
        .per_request<unit_of_work>()
        .per_request<handler, scoped_handler>();
    return reg;
}

TEST(di_scope, one_object_per_scope_shared_within_it) {
    trail log;
    keel::di::container c = request_registry(log).build();
    keel::di::scope first = c.make_scope();
    keel::di::scope second = c.make_scope();
    unit_of_work& a = first.get<unit_of_work>();
    unit_of_work& b = second.get<unit_of_work>();
    EXPECT_NE(&a, &b);
    EXPECT_EQ(&a, &first.get<unit_of_work>());
    EXPECT_EQ(&a.ctx, &first.get<request_context>());
    EXPECT_NE(&a.ctx, &b.ctx);
    // Singletons are the container's, whichever scope asks.
    EXPECT_EQ(&a.db, &b.db);
    EXPECT_EQ(&first.get<database>(), &c.get<database>());
}

TEST(di_scope, per_request_objects_are_made_on_first_use_only) {
    trail log;
    keel::di::container c = request_registry(log).build();
    EXPECT_TRUE(log.events.empty());
    {
        keel::di::scope s = c.make_scope();
        EXPECT_TRUE(log.events.empty());
        s.get<request_context>();
        EXPECT_EQ(log.events, (std::vector<std::string>{"+context"}));
    }
    EXPECT_EQ(log.events, (std::vector<std::string>{"+context", "-context"}));
}

TEST(di_scope, objects_die_with_their_scope_in_reverse_order_of_creation) {
    trail log;
    keel::di::container c = request_registry(log).build();
    {
        keel::di::scope s = c.make_scope();
        s.get<unit_of_work>();
    }
    EXPECT_EQ(log.events,
              (std::vector<std::string>{"+context", "+unit_of_work", "-unit_of_work", "-context"}));
}

TEST(di_scope, the_container_refuses_per_request_types) {
    trail log;
    keel::di::container c = request_registry(log).build();
    try {
        c.get<unit_of_work>();
        FAIL() << "get() resolved a per-request type from the container";
    } catch (const keel::di::error& e) {
        EXPECT_NE(std::string(e.what()).find("di_test::unit_of_work is per-request"),
                  std::string::npos);
    }
}

TEST(di_scope, injected_scope_stays_valid_when_the_scope_handle_moves) {
    trail log;
    keel::di::container c = request_registry(log).build();
    keel::di::scope original = c.make_scope();
    handler& h = original.get<handler>();
    keel::di::scope moved = std::move(original);
    EXPECT_EQ(&h.work(), &moved.get<unit_of_work>());
    EXPECT_THROW(original.get<handler>(), keel::di::error);  // NOLINT: use after move
}

TEST(di_scope, per_request_factories_receive_their_dependencies) {
    trail log;
    auto reg = request_registry(log);
    reg.per_request<std::string>([](database& db, request_context&) {
        ++db.queries;
        return std::string("query ") + std::to_string(db.queries);
    });
    keel::di::container c = reg.build();
    EXPECT_EQ(c.make_scope().get<std::string>(), "query 1");
    EXPECT_EQ(c.make_scope().get<std::string>(), "query 2");
}

TEST(di_scope, replace_keeps_a_per_request_lifetime) {
    trail log;
    auto reg = request_registry(log);
    reg.replace<request_context>([](trail& t) { return request_context(t); });
    keel::di::container c = reg.build();
    keel::di::scope a = c.make_scope();
    keel::di::scope b = c.make_scope();
    EXPECT_NE(&a.get<request_context>(), &b.get<request_context>());
}

TEST(di_scope, a_scope_keeps_the_singletons_alive_after_the_container_goes) {
    trail log;
    auto c = std::make_unique<keel::di::container>(request_registry(log).build());
    keel::di::scope s = c->make_scope();
    database& db = s.get<database>();
    c.reset();
    unit_of_work& work = s.get<unit_of_work>();
    EXPECT_EQ(&work.db, &db);
}

}  // namespace
