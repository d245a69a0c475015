// fuzz_json_text: keel::dump_json / append_json_string against nlohmann's dump(), which they
// must match byte for byte, exception for exception, under each UTF-8 error handler.
//
// Input: a mode byte, then bytes. Mode even: the bytes as a JSON document (when nlohmann
// parses it) is written by both. Mode odd: the bytes as they are, possibly not UTF-8, become a
// string, an object's key and an array element, and (the first eight) a double's bits.
// Either writer may throw only nlohmann's type_error, and then both throw the same one.

#include <cstdint>
#include <cstring>
#include <keel/framework/json_text.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "fuzz_check.hpp"

namespace {

using nlohmann::json;
using handler = keel::json_utf8_handler;

// The text a writer gives, or the message of the type_error it throws.
struct outcome {
    std::optional<std::string> text;
    std::string error;
    bool operator==(const outcome&) const = default;
};

template <class Write>
outcome run(Write write) {
    try {
        return {write(), {}};
    } catch (const json::type_error& e) {
        return {std::nullopt, e.what()};
    }
}

void check_value(const json& value) {
    for (auto h : {handler::strict, handler::replace, handler::ignore}) {
        auto theirs = run([&] { return value.dump(-1, ' ', false, h); });
        auto ours = run([&] { return keel::dump_json(value, h); });
        KEEL_FUZZ_CHECK(ours == theirs);
        auto appended = run([&] {
            std::string out = "x";
            keel::append_json(out, value, h);
            return out.substr(1);
        });
        KEEL_FUZZ_CHECK(appended == theirs);
    }
}

void check_raw(const std::string& bytes) {
    check_value(json(bytes));
    check_value(json::object({{bytes, 1}, {"k", bytes}}));
    check_value(json::array({bytes, 1.5, nullptr}));
    auto theirs = run([&] { return json(bytes).dump(); });
    auto ours = run([&] {
        std::string out;
        keel::append_json_string(out, bytes);
        return out;
    });
    KEEL_FUZZ_CHECK(ours == theirs);
    KEEL_FUZZ_CHECK(!keel::json_verbatim(bytes) ||
                    (theirs.text && *theirs.text == "\"" + bytes + "\""));
    if (bytes.size() >= sizeof(double)) {
        double x;
        std::memcpy(&x, bytes.data(), sizeof x);
        check_value(json(x));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string bytes(keel::fuzz::as_text(data + 1, size - 1));
    if (data[0] % 2 == 0) {
        auto value = json::parse(bytes, nullptr, false);
        if (!value.is_discarded()) check_value(value);
    } else {
        check_raw(bytes);
    }
    return 0;
}
