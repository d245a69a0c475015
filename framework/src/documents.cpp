#include <keel/framework/documents.hpp>

namespace keel {

asio::awaitable<expected<std::optional<std::string>, model_error>> documents::read_for_update(
    std::string model, std::string id) {
    co_return co_await get(std::move(model), std::move(id));
}

asio::awaitable<expected<documents::put_if_result, model_error>> documents::put_if(
    std::string model, std::string id, std::optional<std::string> expected, std::string json) {
    auto got = co_await lock(std::move(model), std::move(id), std::chrono::milliseconds(0));
    if (!got) {
        if (got.error().kind == model_error::code::lock_timeout) co_return put_if_result::locked;
        co_return unexpected(std::move(got).error());
    }
    if (got->document != expected) co_return put_if_result::changed;
    auto saved = co_await got->lease->save_and_release(std::move(json));
    if (!saved) co_return unexpected(std::move(saved).error());
    co_return put_if_result::written;
}

}  // namespace keel
