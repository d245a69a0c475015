// keel: inspect and repair the process instances of a Keel service through its admin API,
// or write a new service project (keel new).
// Everything happens in run_cli (cli.hpp); see README.md for the commands.

#include <iostream>

#include "cli.hpp"

int main(int argc, char** argv) {
    return keel::cli::run_cli(argc, argv, std::cout, std::cerr);
}
