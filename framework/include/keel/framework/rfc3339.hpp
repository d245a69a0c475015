#pragma once

/// @file
/// RFC 3339 times, as Keel's HTTP APIs write and read them.
///
/// @code
///   auto at = keel::parse_rfc3339("2026-11-23T12:00:00+02:00");  // 10:00 UTC
///   keel::format_rfc3339(*at);                                     // "2026-11-23T10:00:00.000Z"
/// @endcode
///
/// parse_rfc3339 takes any offset from UTC ("Z", "+02:00", "-01:30"), 'T', 't' or a space
/// between date and time, and a fraction of a second, kept to the millisecond; a leap second
/// (":60") counts as the second before it. Anything else is nullopt: a date that does not
/// exist, an hour past 23, a missing offset, a time outside time_point's range (about 1678 to
/// 2262). A '+' that a query string decoded into a space
/// before the offset is read as '+' (`?since=...T10:00:00+01:00` unencoded). format_rfc3339
/// writes UTC with milliseconds.

#include <keel/framework/clock.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace keel {

/// The instant `text` names; nullopt when it is not an RFC 3339 time (see the file's
/// description).
std::optional<time_point> parse_rfc3339(std::string_view text);
/// `t` in UTC with milliseconds: "2026-11-23T10:00:00.000Z".
std::string format_rfc3339(time_point t);

}  // namespace keel
