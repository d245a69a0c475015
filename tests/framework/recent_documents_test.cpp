// recent_documents: the bounded, least-recently-used memory of documents behind
// redis_documents::read_for_update.

#include "../../framework/src/recent_documents.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using keel::recent_documents;

constexpr std::size_t cost(std::size_t key, std::size_t document) {
    return key + document + recent_documents::entry_overhead;
}

TEST(recent_documents, remembers_replaces_and_forgets) {
    recent_documents recent(1 << 20);
    EXPECT_EQ(recent.find("a"), std::nullopt);
    recent.remember("a", "one");
    EXPECT_EQ(recent.find("a"), "one");
    recent.remember("a", "three");
    EXPECT_EQ(recent.find("a"), "three");
    EXPECT_EQ(recent.size(), 1u);
    EXPECT_EQ(recent.bytes(), cost(1, 5));
    recent.forget("a");
    recent.forget("never there");
    EXPECT_EQ(recent.find("a"), std::nullopt);
    EXPECT_EQ(recent.bytes(), 0u);
}

TEST(recent_documents, the_least_recently_used_go_first_when_over_budget) {
    recent_documents recent(3 * cost(1, 10));
    recent.remember("a", std::string(10, 'a'));
    recent.remember("b", std::string(10, 'b'));
    recent.remember("c", std::string(10, 'c'));
    EXPECT_TRUE(recent.find("a"));  // a is now the most recently used; b the least
    recent.remember("d", std::string(10, 'd'));
    EXPECT_EQ(recent.find("b"), std::nullopt);
    EXPECT_TRUE(recent.find("a") && recent.find("c") && recent.find("d"));
    EXPECT_EQ(recent.bytes(), 3 * cost(1, 10));
    recent.remember("e", std::string(10 + cost(1, 10), 'e'));  // takes two entries' room
    EXPECT_EQ(recent.size(), 2u);
    EXPECT_EQ(recent.find("a"), std::nullopt);  // the least recently used of a, c, d
    EXPECT_EQ(recent.find("c"), std::nullopt);
    EXPECT_LE(recent.bytes(), 3 * cost(1, 10));
}

// A document remembered again under a key it holds replaces the old one where it is: the
// entry becomes the most recently used, and a larger document evicts others, never itself.
TEST(recent_documents, a_document_remembered_again_is_the_most_recent_and_counted_anew) {
    recent_documents recent(3 * cost(1, 10));
    recent.remember("a", std::string(10, 'a'));
    recent.remember("b", std::string(10, 'b'));
    recent.remember("c", std::string(10, 'c'));
    recent.remember("a", std::string(4, 'A'));  // a the most recently used; b the least
    EXPECT_EQ(recent.bytes(), 2 * cost(1, 10) + cost(1, 4));
    recent.remember("a", std::string(11 + cost(1, 10), 'A'));  // more than two entries' room
    EXPECT_EQ(recent.find("b"), std::nullopt);
    EXPECT_EQ(recent.find("c"), std::nullopt);
    EXPECT_EQ(recent.find("a"), std::string(11 + cost(1, 10), 'A'));
    EXPECT_EQ(recent.size(), 1u);
    EXPECT_EQ(recent.bytes(), cost(1, 11 + cost(1, 10)));
}

TEST(recent_documents, a_document_over_the_budget_is_not_kept_and_drops_the_older_one) {
    recent_documents recent(cost(1, 100));
    recent.remember("a", "small");
    recent.remember("b", std::string(100, 'b'));  // fits alone: a goes
    EXPECT_EQ(recent.find("a"), std::nullopt);
    recent.remember("b", std::string(101, 'b'));
    EXPECT_EQ(recent.find("b"), std::nullopt);
    EXPECT_EQ(recent.bytes(), 0u);
    recent_documents none(0);
    none.remember("a", "");
    EXPECT_EQ(none.find("a"), std::nullopt);
}

}  // namespace
