#pragma once

// Putting user input into request targets, and cursors back onto a command line.
// Instance ids contain '/' ("fulfil/o-17") and go into the path as they are after the
// verb ("/admin/instances/fulfil/o-17"); every other byte outside [A-Za-z0-9-._~/] is
// percent-encoded, so an id reaches the service exactly as typed.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::cli {

// `text` with every byte outside [A-Za-z0-9-._~/] written as %XX (upper-case hex).
std::string percent_encode(std::string_view text);

using query_params = std::vector<std::pair<std::string, std::string>>;

// "?a=1&b=x%20y" (names and values percent-encoded), or "" when none is left: parameters
// with an empty value count as not given and are left out.
std::string query_string(const query_params& params);

// `text` as one shell word: as is when it is plain, else in single quotes.
std::string shell_quote(std::string_view text);

}  // namespace keel::cli
