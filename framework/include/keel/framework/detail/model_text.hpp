#pragma once

// The document text of a model value, for repository<T> and locked<T>: the model's own
// to_json_text where it has one (model.hpp, writes_json_text), compared with nlohmann's text
// for the first values of the model, else nlohmann's tree written by dump_json.

#include <atomic>
#include <keel/framework/json_text.hpp>
#include <keel/framework/model.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace keel::detail {

// How many more values of model T have their own text compared with nlohmann's.
template <class T>
inline std::atomic<int> text_checks_left{16};

template <model T>
void check_model_text(const std::string& text, const T& value) {
    auto expected = dump_json(nlohmann::json(value));
    if (text != expected)
        throw std::logic_error(std::string(model_traits<T>::name) + ": to_json_text wrote " + text +
                               " where nlohmann writes " + expected);
}

template <model T>
std::string model_text(const T& value) {
    if constexpr (writes_json_text<T>) {
        std::string text;
        text.reserve(256);
        to_json_text(text, value);
        if (text_checks_left<T>.load(std::memory_order_relaxed) > 0 &&
            text_checks_left<T>.fetch_sub(1, std::memory_order_relaxed) > 0)
            check_model_text(text, value);
        return text;
    } else {
        return dump_json(nlohmann::json(value));
    }
}

}  // namespace keel::detail
