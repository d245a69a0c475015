// Request-body JSON: keel::http::parse_json (nlohmann's SAX parser, nesting bounded while
// parsing, errors naming the field) against nlohmann::json::parse in the same run, on a
// typical order body and on the hostile one: 1 MiB of '[' that nlohmann nests without
// limit and parse_json refuses at level 65. And the way out: keel::dump_json (the same
// bytes) against nlohmann's dump() of the parsed order body.
//   build/tests/bench/keel_json_bench

#include <benchmark/benchmark.h>

#include <keel/framework/json_text.hpp>
#include <keel/http/json.hpp>
#include <keel/http/problem.hpp>
#include <string>

namespace {

const std::string order_body =
    R"({"id": "o-1842", "email": "ada@example.com", "address": "1 Harbour Road, Leith",)"
    R"( "total": 42.5, "lines": [{"sku": "kettle-2l", "qty": 1, "price": 30.0},)"
    R"( {"sku": "filter", "qty": 3, "price": 4.1666}], "note": null, "gift": false})";

const std::string nested_body = std::string(512 * 1024, '[') + std::string(512 * 1024, ']');

void order_nlohmann(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(order_body));
}
void order_keel(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(keel::http::parse_json(order_body));
}

void nested_1mib_nlohmann(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(nested_body));
}
void nested_1mib_keel(benchmark::State& state) {
    for (auto _ : state) {
        try {
            benchmark::DoNotOptimize(keel::http::parse_json(nested_body));
        } catch (const keel::http::problem_error& e) {
            benchmark::DoNotOptimize(e.problem().status);
        }
    }
}

const nlohmann::json order_value = nlohmann::json::parse(order_body);

void dump_order_nlohmann(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(order_value.dump());
}
void dump_order_keel(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(keel::dump_json(order_value));
}

BENCHMARK(order_nlohmann);
BENCHMARK(order_keel);
BENCHMARK(nested_1mib_nlohmann)->Unit(benchmark::kMillisecond);
BENCHMARK(nested_1mib_keel)->Unit(benchmark::kMicrosecond);
BENCHMARK(dump_order_nlohmann);
BENCHMARK(dump_order_keel);

}  // namespace

BENCHMARK_MAIN();
