#include "teardown.hpp"

#include <algorithm>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/query.hpp>
#include <mutex>
#include <vector>

namespace keel::redis::detail {

namespace {

namespace asio = boost::asio;

class teardown_service : public asio::execution_context::service {
  public:
    static inline asio::execution_context::id id;

    explicit teardown_service(asio::execution_context& context) : service(context) {}

    void add(std::weak_ptr<pending_owner> owner) {
        std::lock_guard lock(mutex_);
        std::erase_if(owners_, [](const auto& o) { return o.expired(); });
        owners_.push_back(std::move(owner));
    }

  private:
    void shutdown() override {
        std::vector<std::weak_ptr<pending_owner>> owners;
        {
            std::lock_guard lock(mutex_);
            owners.swap(owners_);
        }
        for (auto& weak : owners)
            if (auto owner = weak.lock()) owner->drop_pending();
    }

    std::mutex mutex_;
    std::vector<std::weak_ptr<pending_owner>> owners_;
};

}  // namespace

void drop_pending_at_shutdown(const asio::any_io_executor& executor,
                              std::weak_ptr<pending_owner> owner) {
    auto& context = asio::query(executor, asio::execution::context);
    asio::use_service<teardown_service>(context).add(std::move(owner));
}

}  // namespace keel::redis::detail
