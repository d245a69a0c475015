// keel_signals_tests: the signal cases (signals_test.cpp, in keel_signals_cases) on the
// in-memory store. See CMakeLists.txt.
