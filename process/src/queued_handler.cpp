#include "queued_handler.hpp"

#include <keel/process/context.hpp>
#include <keel/process/queue.hpp>

namespace keel::process::detail {

durable<nlohmann::json> admitted_then(context& ctx, std::string queue, bool admitted_at_enqueue,
                                      engine::factory handler, nlohmann::json params) {
    ctx.patched(queue_marker(queue, admitted_at_enqueue));
    if (!admitted_at_enqueue) {
        std::string path(admission_path);
        auto admitted = ctx.wait<nlohmann::json>(path);
        co_await admitted;
    }
    auto root = handler(ctx, params);
    co_return co_await root;
}

engine::factory as_journaled(engine::factory handler, const std::vector<journal_entry>& journal) {
    auto queue = queue_of(journal);
    if (!queue) return handler;
    return [handler = std::move(handler), queue = *queue, admitted = admitted_at_enqueue(journal)](
               context& ctx, const nlohmann::json& params) {
        return admitted_then(ctx, queue, admitted, handler, params);
    };
}

}  // namespace keel::process::detail
