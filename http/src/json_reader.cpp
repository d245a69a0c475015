// parse_json: nlohmann's SAX parser feeding a document builder that bounds the nesting
// depth and knows where it is, so that an error names the field it happened in. nlohmann's
// own DOM parser has neither: it nests without limit and reports a number overflow as an
// out_of_range exception without a position in the document.

#include <keel/http/json.hpp>
#include <keel/http/problem.hpp>

namespace keel::http {

namespace {

using json = nlohmann::json;

class bounded_builder {
  public:
    explicit bounded_builder(std::size_t max_depth) : max_depth_(max_depth) {}

    bool null() { return put(nullptr) != nullptr; }
    bool boolean(bool v) { return put(v) != nullptr; }
    bool number_integer(json::number_integer_t v) { return put(v) != nullptr; }
    bool number_unsigned(json::number_unsigned_t v) { return put(v) != nullptr; }
    bool number_float(json::number_float_t v, const json::string_t&) { return put(v) != nullptr; }
    bool string(json::string_t& v) { return put(std::move(v)) != nullptr; }
    bool binary(json::binary_t& v) { return put(json::binary(std::move(v))) != nullptr; }
    bool start_object(std::size_t) { return open(json::value_t::object); }
    bool start_array(std::size_t) { return open(json::value_t::array); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool key(json::string_t& k) {
        member_ = &(*open_.back())[k];  // a repeated key: the last value wins, as in nlohmann
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
        if (e.id == 406)  // out_of_range.406: number overflow
            return fail(
                problem{status::bad_request, where() + ": " + detail::describe(e), pointer()});
        return fail(problem{status::bad_request, "invalid JSON: " + detail::describe(e)});
    }

    json take() { return std::move(root_); }
    std::optional<problem>& error() { return error_; }

  private:
    // Places a value where the parser is, and returns where it went.
    json* put(json&& v) {
        if (open_.empty()) {
            root_ = std::move(v);
            return &root_;
        }
        if (open_.back()->is_object()) {
            *member_ = std::move(v);
            return member_;
        }
        open_.back()->emplace_back(std::move(v));
        return &open_.back()->back();
    }

    bool open(json::value_t type) {
        if (open_.size() >= max_depth_)
            return fail(
                problem{status::bad_request,
                        where() + ": nested deeper than " + std::to_string(max_depth_) + " levels",
                        pointer()});
        open_.push_back(put(json(type)));
        return true;
    }

    bool close() {
        open_.pop_back();
        return true;
    }

    bool fail(problem p) {
        error_ = std::move(p);
        return false;
    }

    // A JSON pointer to the value being read (errors only): in an object the member whose
    // key was read last, in an array the element after the last one complete (an open
    // container is the last element already).
    std::string pointer() const {
        std::string out;
        for (std::size_t i = 0; i < open_.size(); ++i) {
            const json& container = *open_[i];
            const json* inner = i + 1 < open_.size() ? open_[i + 1] : member_;
            out += '/';
            if (container.is_object()) {
                for (auto it = container.begin(); it != container.end(); ++it) {
                    if (&*it != inner) continue;
                    for (char c : it.key())
                        out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
                }
            } else {
                auto size = container.size();
                out += std::to_string(i + 1 < open_.size() ? size - 1 : size);
            }
        }
        return out;
    }
    std::string where() const {
        auto p = pointer();
        return p.empty() ? std::string("body") : "field " + p;
    }

    std::size_t max_depth_;
    json root_;
    std::vector<json*> open_;  // the containers being filled, outermost first
    json* member_ = nullptr;   // in the innermost object: the member being read
    std::optional<problem> error_;
};

}  // namespace

json parse_json(std::string_view text, json_limits limits) {
    bounded_builder builder(limits.max_depth);
    bool ok = json::sax_parse(text, &builder);
    if (builder.error()) throw problem_error(std::move(*builder.error()));
    if (!ok) throw problem_error(status::bad_request, "invalid JSON");
    return builder.take();
}

}  // namespace keel::http
