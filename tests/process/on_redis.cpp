// keel_process_redis_tests: the engine's cases (durable_test, operations_test, flows_test),
// linked from the keel_process_engine_cases object library, run with KEEL_PROCESS_STORE=redis
// so their harness uses the Redis store. See CMakeLists.txt.
