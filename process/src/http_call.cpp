#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <keel/framework/digest.hpp>
#include <keel/process/http_call.hpp>
#include <stdexcept>

namespace keel::process {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// The three forms of RFC 9110's HTTP-date: IMF-fixdate, RFC 850, asctime.
std::optional<std::chrono::system_clock::time_point> parse_http_date(std::string_view value) {
    static constexpr const char* formats[] = {"%a, %d %b %Y %H:%M:%S GMT",
                                              "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"};
    std::string text(value);
    for (const char* format : formats) {
        std::tm tm{};
        const char* end = strptime(text.c_str(), format, &tm);
        if (!end || *end != '\0') continue;
        return std::chrono::system_clock::from_time_t(timegm(&tm));
    }
    return std::nullopt;
}

// Strict, as nlohmann's dump is: no overlong forms, no surrogates, nothing past U+10FFFF.
bool valid_utf8(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        unsigned c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t n = 0;
        unsigned cp = 0, least = 0;
        if ((c & 0xe0) == 0xc0) {
            n = 1, cp = c & 0x1f, least = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2, cp = c & 0x0f, least = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3, cp = c & 0x07, least = 0x10000;
        } else {
            return false;
        }
        if (s.size() - i <= n) return false;
        for (std::size_t k = 1; k <= n; ++k) {
            unsigned b = static_cast<unsigned char>(s[i + k]);
            if ((b & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (b & 0x3f);
        }
        if (cp < least || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += n + 1;
    }
    return true;
}

std::string base64_encode(std::string_view bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3), '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(bytes.data()),
                            static_cast<int>(bytes.size()));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

std::string base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) throw std::runtime_error("body_base64 is not base64");
    std::string out(3 * text.size() / 4, '\0');
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(text.data()),
                            static_cast<int>(text.size()));
    if (n < 0) throw std::runtime_error("body_base64 is not base64");
    std::size_t padding = 0;
    for (auto it = text.rbegin(); it != text.rend() && *it == '=' && padding < 2; ++it) ++padding;
    out.resize(static_cast<std::size_t>(n) - padding);
    return out;
}

bool kept(const std::vector<std::string>& keep, std::string_view name) {
    return std::any_of(keep.begin(), keep.end(),
                       [&](const std::string& k) { return http::iequals(k, name); });
}

// One attempt after another of one call: the engine's retry loop calls attempt().
class http_body final : public detail::run_body {
  public:
    http_body(http::client& client, http_request_builder build, http_call_options options,
              int max_attempts, std::string key)
        : client_(&client),
          build_(std::move(build)),
          options_(std::move(options)),
          max_attempts_(max_attempts),
          key_(std::move(key)) {}

    asio::awaitable<nlohmann::json> attempt(detail::step_writes& writes) override {
        ++attempts_;
        http::client_request req = request();
        const auto* span = writes.attempt_span();  // each attempt's call is its child
        if (!req.trace && span) req.trace = *span;
        auto res = co_await send(std::move(req));
        if (!res) throw_transport(res.error());
        co_return answer(*res);
    }

  private:
    http::client_request request() {
        try {
            if (!request_) {
                request_ = build_(key_);
                request_->header(options_.key_header, key_);
            }
            return *request_;
        } catch (const std::invalid_argument& e) {  // the caller's mistake: retrying cannot help
            throw terminal_error(e.what());
        }
    }
    asio::awaitable<http::client::result> send(http::client_request req) {
        try {
            co_return co_await client_->request(std::move(req));
        } catch (const std::invalid_argument& e) {
            throw terminal_error(e.what());
        }
    }

    [[noreturn]] void throw_transport(const http::client_error& e) const {
        auto message = describe() + ": " + e.message;
        if (e.kind == http::client_error_kind::too_large) throw terminal_error(message);
        throw std::runtime_error(message);
    }

    nlohmann::json answer(const http::client_response& res) const {
        int code = res.status_code();
        auto said = describe() + " answered " + std::to_string(code);
        if (attempts_ < max_attempts_ && retried(code)) throw_retry(res, said);
        if (options_.fail_on_error_status && !res.ok()) throw terminal_error(said);
        if (res.body().size() > options_.max_body)
            throw terminal_error(said + " with a body of " + std::to_string(res.body().size()) +
                                 " bytes, over the bound of " + std::to_string(options_.max_body) +
                                 " (http_call_options::max_body)");
        return detail::encode_response(res, options_.keep_headers);
    }

    bool retried(int code) const {
        if (code >= 500 || code == 429) return true;
        auto& extra = options_.retry_statuses;
        return std::find(extra.begin(), extra.end(), code) != extra.end();
    }

    [[noreturn]] void throw_retry(const http::client_response& res, const std::string& said) const {
        auto after = res.header("Retry-After");
        if (!after) throw std::runtime_error(said);
        auto wait = parse_retry_after(*after, std::chrono::system_clock::now());
        if (!wait) throw std::runtime_error(said + " (Retry-After not understood)");
        throw retry_later(said + ", Retry-After: " + std::string(*after),
                          std::min(*wait, options_.max_retry_after));
    }

    std::string describe() const {
        if (!request_) return "the request";
        return std::string(http::to_string(request_->method)) + " " + request_->url;
    }

    http::client* client_;
    http_request_builder build_;
    http_call_options options_;
    int max_attempts_;
    std::string key_;
    std::optional<http::client_request> request_;
    int attempts_ = 0;
};

}  // namespace

std::string idempotency_key(std::string_view instance, std::uint64_t seq, std::string_view name) {
    std::string material(instance);
    material += '\n';
    material += std::to_string(seq);
    material += '\n';
    material += name;
    return "k1-" + sha256_hex(material).substr(0, 32);
}

std::optional<duration> parse_retry_after(std::string_view value,
                                          std::chrono::system_clock::time_point now) {
    value = trim(value);
    if (value.empty()) return std::nullopt;
    if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        std::int64_t seconds = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
        if (ec == std::errc::result_out_of_range || seconds > 100LL * 365 * 24 * 3600)
            seconds = 100LL * 365 * 24 * 3600;  // absurd: the caller's bound applies
        return std::chrono::duration_cast<duration>(std::chrono::seconds(seconds));
    }
    auto at = parse_http_date(value);
    if (!at) return std::nullopt;
    if (*at <= now) return duration::zero();
    return std::chrono::duration_cast<duration>(*at - now);
}

http_op::http_op(detail::runtime& rt, std::string name, http::client& client,
                 http_request_builder build, http_call_options options, retry_policy policy)
    : async_op(rt),
      name_(std::move(name)),
      client_(&client),
      build_(std::move(build)),
      options_(std::move(options)),
      policy_(std::move(policy)) {}

bool http_op::await_ready() {
    auto body = [this]() -> std::shared_ptr<detail::run_body> {
        auto plain = std::make_shared<http_body>(*client_, std::move(build_), std::move(options_),
                                                 policy_.max_attempts,
                                                 idempotency_key(rt_->id(), seq_, name_));
        if (!limit_) return plain;
        return std::make_shared<detail::limited_body>(std::move(plain), std::move(*limit_), *rt_,
                                                      seq_);
    };
    return begin_executed(op_kind::run, name_, body, policy_);
}

http::client_response http_op::await_resume() {
    throw_if_failed(name_);
    return std::move(*response_);
}

bool http_op::accept(const journal_entry& e, std::string& reason) noexcept {
    pending_ = false;
    if (failed_entry(e)) return true;
    try {
        response_.emplace(detail::decode_response(e.value));
        return true;
    } catch (const std::exception& x) {
        reason = x.what();
        return false;
    }
}

namespace detail {

nlohmann::json encode_response(const http::client_response& res,
                               const std::vector<std::string>& keep_headers) {
    nlohmann::json fields = nlohmann::json::array();
    for (const auto& [name, value] : res.headers())
        if (kept(keep_headers, name) && valid_utf8(value))
            fields.push_back(nlohmann::json::array({name, value}));
    nlohmann::json out = {{"status", res.status_code()}, {"headers", std::move(fields)}};
    if (valid_utf8(res.body()))
        out["body"] = res.body();
    else
        out["body_base64"] = base64_encode(res.body());
    if (valid_utf8(res.url())) out["url"] = res.url();
    return out;
}

http::client_response decode_response(const nlohmann::json& j) {
    http::headers fields;
    for (const auto& f : j.at("headers"))
        fields.add(f.at(0).get<std::string>(), f.at(1).get<std::string>());
    std::string body = j.contains("body_base64")
                           ? base64_decode(j["body_base64"].get<std::string>())
                           : j.at("body").get<std::string>();
    return http::client_response(static_cast<http::status>(j.at("status").get<int>()),
                                 std::move(fields), std::move(body), j.value("url", std::string()));
}

}  // namespace detail

http_op context::http(std::string name, http::client& client, http::client_request request) {
    return http(std::move(name), client, std::move(request), http_call_options{});
}

http_op context::http(std::string name, http::client& client, http::client_request request,
                      http_call_options options) {
    http_request_builder build = [request = std::move(request)](const std::string&) {
        return request;
    };
    return http(std::move(name), client, std::move(build), std::move(options));
}

http_op context::http(std::string name, http::client& client, http_request_builder build) {
    return http(std::move(name), client, std::move(build), http_call_options{});
}

http_op context::http(std::string name, http::client& client, http_request_builder build,
                      http_call_options options) {
    retry_policy policy = options.retry ? *options.retry : step_policy_;
    return http_op(*rt_, std::move(name), client, std::move(build), std::move(options),
                   std::move(policy));
}

}  // namespace keel::process
