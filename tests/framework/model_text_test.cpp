// Models that write their own JSON text (keel::writes_json_text): repository<T> and
// locked<T> write documents with to_json_text, byte for byte nlohmann's text, and compare
// the two for the first 16 values of each model (in every build), so a text that differs
// (members out of nlohmann's order here) throws std::logic_error at the first write instead
// of storing a document nobody else writes that way.

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <keel/framework/clock.hpp>
#include <keel/framework/json_text.hpp>
#include <keel/framework/memory_documents.hpp>
#include <keel/framework/repository.hpp>
#include <keel/test/run.hpp>
#include <stdexcept>

namespace {

namespace asio = boost::asio;

int trees = 0;  // to_json calls: nlohmann's tree built
int texts = 0;  // to_json_text calls

struct parcel {
    static constexpr std::string_view model_name = "parcel";
    std::string label;
    double weight = 0;
};
void to_json(nlohmann::json& j, const parcel& p) {
    ++trees;
    j = nlohmann::json::object();
    j["weight"] = p.weight;
    j["label"] = p.label;
}
void from_json(const nlohmann::json& j, parcel& p) {
    j.at("label").get_to(p.label);
    j.at("weight").get_to(p.weight);
}
void to_json_text(std::string& out, const parcel& p) {
    ++texts;
    out += R"({"label":)";
    keel::append_json_string(out, p.label);
    out += R"(,"weight":)";
    keel::append_json_number(out, p.weight);
    out += '}';
}

// A parcel that writes its members out of nlohmann's order (which sorts them).
struct crate : parcel {
    static constexpr std::string_view model_name = "crate";
};
void to_json_text(std::string& out, const crate& c) {
    out += R"({"weight":)";
    keel::append_json_number(out, c.weight);
    out += R"(,"label":)";
    keel::append_json_string(out, c.label);
    out += '}';
}

struct plain {
    static constexpr std::string_view model_name = "plain";
    std::string label;
};
void to_json(nlohmann::json& j, const plain& p) {
    j = {{"label", p.label}};
}
void from_json(const nlohmann::json& j, plain& p) {
    j.at("label").get_to(p.label);
}

static_assert(keel::writes_json_text<parcel>);
static_assert(keel::writes_json_text<crate>);
static_assert(!keel::writes_json_text<plain>);

class model_text : public ::testing::Test {
  protected:
    void SetUp() override {
        trees = texts = 0;
        keel::detail::text_checks_left<parcel> = 16;  // as at the start of a process
    }

    template <class T>
    T run(asio::awaitable<T> task) {
        return keel::test::run(io, std::move(task));
    }
    std::string stored(std::string model, std::string id) {
        return run(docs.get(std::move(model), std::move(id))).value().value();
    }

    asio::io_context io;
    keel::system_clock clock;
    keel::memory_documents docs{clock, std::chrono::milliseconds(100)};
};

TEST_F(model_text, a_model_writes_its_own_text_checked_against_nlohmanns_for_the_first_values) {
    keel::repository<parcel> parcels(docs);
    auto write = [&](int i) {
        parcel p{"p \"" + std::to_string(i) + "\"\n", 0.1 * i};
        auto r = keel::ref<parcel>("p-" + std::to_string(i));
        EXPECT_TRUE(run(parcels.put(r, p)).has_value());
        EXPECT_EQ(stored("parcel", r.id()), nlohmann::json(p).dump());
    };
    for (int i = 0; i < 16; ++i) write(i);
    EXPECT_EQ(texts, 16);
    EXPECT_EQ(trees, 32);  // 16 compared (and 16 for the test's own expectations)
    for (int i = 16; i < 20; ++i) write(i);
    EXPECT_EQ(texts, 20);
    EXPECT_EQ(trees, 36);  // only the test's own: the repository built no tree

    // update() and locked<T>::save() write with it too.
    auto r = keel::ref<parcel>("p-1");
    auto heavier = [](std::optional<parcel>& p) {
        p->weight += 1;
        return true;
    };
    ASSERT_TRUE(run(parcels.update(r, heavier)).has_value());
    EXPECT_EQ(texts, 21);
    auto held = run(parcels.lock(r));
    ASSERT_TRUE(held.has_value());
    EXPECT_EQ((*held)->weight, 0.1 + 1);
    (*held)->label = "relabelled";
    ASSERT_TRUE(run(held->save_and_release()).has_value());
    EXPECT_EQ(texts, 22);
    EXPECT_EQ(trees, 36);
    EXPECT_EQ(stored("parcel", "p-1"), nlohmann::json(parcel{"relabelled", 0.1 + 1}).dump());
}

TEST_F(model_text, a_text_that_differs_from_nlohmanns_is_refused_at_the_first_write) {
    keel::repository<crate> crates(docs);
    try {
        (void)run(crates.put(keel::ref<crate>("c-1"), crate{{"box", 2}}));
        FAIL() << "a misordered text was written";
    } catch (const std::logic_error& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("crate"), std::string::npos) << what;
        EXPECT_NE(what.find(R"({"weight":2.0,"label":"box"})"), std::string::npos) << what;
        EXPECT_NE(what.find(R"({"label":"box","weight":2.0})"), std::string::npos) << what;
    }
    EXPECT_FALSE(run(docs.get("crate", "c-1")).value().has_value());
}

TEST_F(model_text, a_model_without_its_own_text_is_written_by_nlohmann) {
    keel::repository<plain> plains(docs);
    ASSERT_TRUE(run(plains.put(keel::ref<plain>("x"), plain{"é"})).has_value());
    EXPECT_EQ(stored("plain", "x"), nlohmann::json(plain{"é"}).dump());
}

}  // namespace
