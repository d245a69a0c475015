// repository<T>'s memory of decoded entities (detail/decoded_entities.hpp): a document read
// again is not parsed again, a changed document always is, an exact_json model's writes are
// remembered and other models' are not, the byte budget holds, and a model that claims
// exact_json falsely is caught in debug builds. Decodes are counted by the models' from_json.

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <keel/framework/clock.hpp>
#include <keel/framework/detail/decoded_entities.hpp>
#include <keel/framework/memory_documents.hpp>
#include <keel/framework/repository.hpp>
#include <keel/test/run.hpp>
#include <stdexcept>

namespace {

namespace asio = boost::asio;

int decodes = 0;

// An entity whose JSON gives back exactly what was written.
struct account {
    static constexpr std::string_view model_name = "account";
    static constexpr bool exact_json = true;
    std::string owner;
    int balance = 0;
};
void to_json(nlohmann::json& j, const account& a) {
    j = {{"owner", a.owner}, {"balance", a.balance}};
}
void from_json(const nlohmann::json& j, account& a) {
    ++decodes;
    j.at("owner").get_to(a.owner);
    j.at("balance").get_to(a.balance);
}

// The same shape without the claim.
struct note {
    static constexpr std::string_view model_name = "note";
    std::string text;
};
void to_json(nlohmann::json& j, const note& n) {
    j = {{"text", n.text}};
}
void from_json(const nlohmann::json& j, note& n) {
    ++decodes;
    j.at("text").get_to(n.text);
}

#ifndef NDEBUG
// Claims exact_json, but normalises on the way in: what it reads back is not what it wrote.
struct shouting {
    static constexpr std::string_view model_name = "shouting";
    static constexpr bool exact_json = true;
    std::string word;
};
void to_json(nlohmann::json& j, const shouting& s) {
    j = {{"word", s.word}};
}
void from_json(const nlohmann::json& j, shouting& s) {
    s.word = j.at("word").get<std::string>();
    for (auto& c : s.word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
}
#endif

static_assert(keel::exact_json<account>);
static_assert(!keel::exact_json<note>);

class decoded_memory : public ::testing::Test {
  protected:
    void SetUp() override { decodes = 0; }

    template <class T>
    T run(asio::awaitable<T> task) {
        return keel::test::run(io, std::move(task));
    }

    asio::io_context io;
    keel::system_clock clock;
    keel::memory_documents docs{clock, std::chrono::milliseconds(100)};
};

TEST_F(decoded_memory, a_document_read_again_is_not_parsed_again) {
    keel::repository<note> notes(docs);
    keel::ref<note> n("n-1");
    ASSERT_TRUE(run(docs.put("note", "n-1", R"({"text":"hello"})")).has_value());
    EXPECT_EQ(run(notes.get(n))->value().text, "hello");
    EXPECT_EQ(run(notes.get(n))->value().text, "hello");
    EXPECT_EQ(decodes, 1);
}

TEST_F(decoded_memory, a_changed_document_is_parsed_anew) {
    keel::repository<note> notes(docs);
    keel::ref<note> n("n-1");
    ASSERT_TRUE(run(docs.put("note", "n-1", R"({"text":"hello"})")).has_value());
    EXPECT_EQ(run(notes.get(n))->value().text, "hello");
    ASSERT_TRUE(run(docs.put("note", "n-1", R"({"text":"bye"})")).has_value());
    EXPECT_EQ(run(notes.get(n))->value().text, "bye");
    EXPECT_EQ(decodes, 2);
    // The earlier version is still known: a reader that sees it again does not parse it.
    ASSERT_TRUE(run(docs.put("note", "n-1", R"({"text":"hello"})")).has_value());
    EXPECT_EQ(run(notes.get(n))->value().text, "hello");
    EXPECT_EQ(decodes, 2);
}

TEST_F(decoded_memory, an_exact_model_hands_what_it_wrote_to_the_next_read) {
    keel::repository<account> accounts(docs);
    keel::ref<account> a("a-1");
    ASSERT_TRUE(run(accounts.put(a, account{"ada", 10})).has_value());
    auto add = [](std::optional<account>& x) {
        x->balance += 5;
        return true;
    };
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(run(accounts.update(a, add)).has_value());
    auto now = run(accounts.get(a));
    ASSERT_TRUE(now.has_value() && now->has_value());
    EXPECT_EQ((*now)->balance, 25);
    int parsed_here = decodes;
#ifndef NDEBUG
    parsed_here -= 4;  // each write's claim checked by a decode (debug builds)
#endif
    EXPECT_EQ(parsed_here, 0);
}

TEST_F(decoded_memory, another_model_is_parsed_after_each_write) {
    keel::repository<note> notes(docs);
    keel::ref<note> n("n-1");
    ASSERT_TRUE(run(notes.put(n, note{"a"})).has_value());
    auto append = [](std::optional<note>& x) {
        x->text += "b";
        return true;
    };
    ASSERT_TRUE(run(notes.update(n, append)).has_value());
    EXPECT_EQ(run(notes.get(n))->value().text, "ab");
    EXPECT_EQ(decodes, 2);  // the update's read of "a", the get's of "ab"
}

TEST_F(decoded_memory, no_budget_means_every_read_parses) {
    keel::repository<note> notes(docs, 0);
    keel::ref<note> n("n-1");
    ASSERT_TRUE(run(docs.put("note", "n-1", R"({"text":"hello"})")).has_value());
    (void)run(notes.get(n));
    (void)run(notes.get(n));
    EXPECT_EQ(decodes, 2);
}

TEST_F(decoded_memory, a_model_that_claims_exact_json_falsely_is_caught_in_debug_builds) {
#ifdef NDEBUG
    GTEST_SKIP() << "the claim is checked in debug builds only";
#else
    keel::repository<shouting> words(docs);
    EXPECT_THROW(run(words.put(keel::ref<shouting>("w-1"), shouting{"quiet"})), std::logic_error);
    EXPECT_NO_THROW(run(words.put(keel::ref<shouting>("w-2"), shouting{"LOUD"})));
#endif
}

TEST(decoded_entities, keeps_within_its_budget_least_recently_used_out_first) {
    using memory = keel::detail::decoded_entities<int>;
    std::string a(100, 'a'), b(100, 'b'), c(100, 'c');
    const std::size_t one = 2 * 100 + memory::entry_overhead;
    memory m(2 * one);
    m.remember(a, 1);
    m.remember(b, 2);
    EXPECT_EQ(m.find(a), 1);  // a is now the most recently used
    m.remember(c, 3);         // b goes
    EXPECT_EQ(m.find(b), std::nullopt);
    EXPECT_EQ(m.find(a), 1);
    EXPECT_EQ(m.find(c), 3);
    EXPECT_EQ(m.size(), 2u);
    m.remember(std::string(one, 'x'), 4);  // larger than the budget: not kept
    EXPECT_EQ(m.size(), 2u);
    EXPECT_EQ(m.find("nothing"), std::nullopt);
}

}  // namespace
