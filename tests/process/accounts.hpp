#pragma once

// The entity the engine's entity-step cases change (update_test.cpp,
// entity_steps_commit_test.cpp): an account, the handlers' dependencies around its
// repository, and a change that shows how often it ran. In an unnamed namespace like the
// cases' own types, which the repository's frames hold beside them (g++ warns of a type with
// linkage holding one without).

#include <keel/framework/repository.hpp>
#include <optional>
#include <string_view>
#include <type_traits>

namespace keel::process::test {
namespace {

struct account {
    static constexpr std::string_view model_name = "account";
    int balance = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(account, balance)
};

// The handlers' dependencies: the accounts, and how often a change ran.
struct bank {
    repository<account>* accounts = nullptr;
    int changes = 0;
    template <class T>
    T& get() {
        if constexpr (std::is_same_v<T, bank>)
            return *this;
        else
            return *accounts;
    }
};

// Adds `amount`: not idempotent, so how often it was applied shows in the balance.
struct deposit {
    int amount;
    int* runs;
    bool operator()(std::optional<account>& a) const {
        ++*runs;
        if (!a) a.emplace();
        a->balance += amount;
        return true;
    }
};

}  // namespace
}  // namespace keel::process::test
