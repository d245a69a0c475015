#include <algorithm>
#include <keel/di/container.hpp>
#include <typeindex>
#include <unordered_map>

#include "graph.hpp"

namespace keel::di {
namespace {

using detail::lifetime;
using detail::registration;
using detail::type_name;

bool is_builtin(const std::type_info& type) {
    return type == typeid(container) || type == typeid(scope);
}

// Finds every problem in a set of registrations: missing dependencies, lifetime
// mismatches and dependency cycles, in registration order.
class validator {
  public:
    explicit validator(const std::vector<registration>& regs) : regs_(regs) {
        for (std::size_t i = 0; i < regs_.size(); ++i) index_.emplace(*regs_[i].type, i);
    }

    std::vector<std::string> run() {
        for (const registration& reg : regs_) check_edges(reg);
        state_.assign(regs_.size(), visit::fresh);
        for (std::size_t i = 0; i < regs_.size(); ++i) {
            if (state_[i] == visit::fresh) find_cycles(i);
        }
        return std::move(problems_);
    }

  private:
    enum class visit { fresh, on_path, done };

    void check_edges(const registration& reg) {
        const bool singleton = reg.life != lifetime::per_request;
        for (const std::type_info* dep : reg.deps) {
            if (*dep == typeid(scope)) {
                if (singleton) {
                    problems_.push_back("lifetime mismatch: singleton " + type_name(*reg.type) +
                                        " depends on keel::di::scope, which exists only per "
                                        "request; make " +
                                        type_name(*reg.type) + " per-request");
                }
                continue;
            }
            if (is_builtin(*dep)) continue;
            auto found = index_.find(*dep);
            if (found == index_.end()) {
                problems_.push_back("missing dependency: " + type_name(*reg.type) + " needs " +
                                    type_name(*dep) + ", which is not registered");
            } else if (singleton && regs_[found->second].life == lifetime::per_request) {
                problems_.push_back("lifetime mismatch: singleton " + type_name(*reg.type) +
                                    " depends on per-request " + type_name(*dep) +
                                    "; a singleton would keep one request's object forever");
            }
        }
    }

    // Depth-first search; every edge back to a type on the current path closes a cycle.
    void find_cycles(std::size_t index) {
        state_[index] = visit::on_path;
        path_.push_back(index);
        for (const std::type_info* dep : regs_[index].deps) {
            auto found = index_.find(*dep);
            if (found == index_.end()) continue;
            std::size_t next = found->second;
            if (state_[next] == visit::on_path) report_cycle(next);
            if (state_[next] == visit::fresh) find_cycles(next);
        }
        path_.pop_back();
        state_[index] = visit::done;
    }

    void report_cycle(std::size_t back_to) {
        std::string text = "dependency cycle: ";
        auto start = std::find(path_.begin(), path_.end(), back_to);
        for (auto it = start; it != path_.end(); ++it) text += type_name(*regs_[*it].type) + " -> ";
        text += type_name(*regs_[back_to].type);
        problems_.push_back(std::move(text));
    }

    const std::vector<registration>& regs_;
    std::unordered_map<std::type_index, std::size_t> index_;
    std::vector<visit> state_;
    std::vector<std::size_t> path_;
    std::vector<std::string> problems_;
};

std::string describe(const std::vector<std::string>& problems) {
    if (problems.size() == 1) return problems.front();
    std::string text = std::to_string(problems.size()) + " problems in the registrations:";
    for (const std::string& problem : problems) text += "\n  " + problem;
    return text;
}

}  // namespace

registry& registry::add(registration reg) {
    if (has(*reg.type)) {
        problems_.push_back("duplicate registration: " + type_name(*reg.type) +
                            " is registered twice (use replace() to swap it for a fake)");
        return *this;
    }
    if (reg.life == lifetime::instance && reg.instance.ptr == nullptr) {
        problems_.push_back("null instance: " + type_name(*reg.type) +
                            " is registered with a null pointer");
    }
    registrations_.push_back(std::move(reg));
    return *this;
}

registry& registry::swap(registration reg) {
    auto existing = std::find_if(registrations_.begin(), registrations_.end(),
                                 [&](const registration& r) { return *r.type == *reg.type; });
    if (existing == registrations_.end()) {
        problems_.push_back("replace: " + type_name(*reg.type) +
                            " is not registered, so there is nothing to replace");
        return *this;
    }
    if (reg.life == lifetime::instance) {
        if (reg.instance.ptr == nullptr) {
            problems_.push_back("null instance: " + type_name(*reg.type) +
                                " is replaced with a null pointer");
        }
    } else {
        reg.life =
            existing->life == lifetime::per_request ? lifetime::per_request : lifetime::singleton;
    }
    *existing = std::move(reg);
    return *this;
}

bool registry::has(const std::type_info& type) const {
    return std::any_of(registrations_.begin(), registrations_.end(),
                       [&](const registration& r) { return *r.type == type; });
}

container registry::build() const {
    std::vector<std::string> problems = problems_;
    for (std::string& problem : validator(registrations_).run()) {
        problems.push_back(std::move(problem));
    }
    if (!problems.empty()) throw error(describe(problems));
    auto built = std::make_shared<detail::graph>(registrations_);
    built->construct_singletons();
    return container(std::move(built));
}

}  // namespace keel::di
