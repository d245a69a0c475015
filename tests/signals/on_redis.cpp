// keel_signals_redis_tests: the signal cases (signals_test.cpp, in keel_signals_cases) with
// KEEL_PROCESS_STORE=redis, so the harness runs them on a redis-server. See CMakeLists.txt.
