#pragma once

// The keel commands, one function each: take the command's options, talk to the admin API
// through an admin_client and write human text or pretty-printed JSON to `out`. A command
// checks its options before its first request and throws usage_error when they do not
// fit together; the API's refusals arrive as api_error, unreachable services as
// transport_error (see errors.hpp).

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "admin_client.hpp"
#include "errors.hpp"

namespace keel::cli {

struct ps_options {
    std::string definition;
    std::string status;
    std::string prefix;
    std::string parent;
    std::string since;  // RFC 3339 or a duration ("1h"), passed through
    std::string until;
    std::string cursor;  // start at this page
    int limit = 50;      // page size
    bool all = false;    // follow `next` to the last page
    bool json = false;
};

struct show_options {
    std::string id;
    bool json = false;
};

struct journal_options {
    std::string id;
    int retry = 0;  // N > 0: the journal as it was before the N-th retry
    bool json = false;
};

struct cancel_options {
    std::string id;
};

// Either `id`, or `parked` with `definition`.
struct resume_options {
    std::string id;
    bool parked = false;
    std::string definition;
};

struct retry_options {
    std::string id;
    std::int64_t from = 0;
    std::vector<std::int64_t> without;  // inbox ids of consumed signals not to give back
};

struct remove_signal_options {
    std::string id;
    std::int64_t inbox = 0;  // the inbox id of the signal to take out
};

struct signal_options {
    std::string path;                    // the signal's path, starting with '/'
    std::optional<std::string> payload;  // JSON text
    std::string key;                     // idempotency key, optional
    std::string instance;                // empty: every subscribed instance
};

struct stats_options {
    bool json = false;
};

struct workers_options {
    bool json = false;
};

struct schedules_options {
    bool json = false;
};

// keel queues [NAME]: every queue, or one with its partitions.
struct queues_options {
    bool json = false;
    std::string name;  // empty: all
};

// keel schedule <action> <name>
struct schedule_options {
    std::string action;  // pause, resume, trigger, backfill, delete
    std::string name;
    std::string from, to;  // backfill: RFC 3339 times
};

struct store_options {
    bool json = false;
    bool confirm = false;  // `keel store confirm`: accept the store as it is
};

// Journal pages are fetched this many entries at a time (the API's maximum).
inline constexpr int journal_page_size = 1000;

exit_code run_ps(admin_client& client, const ps_options& options, std::ostream& out);
exit_code run_show(admin_client& client, const show_options& options, std::ostream& out);
exit_code run_journal(admin_client& client, const journal_options& options, std::ostream& out);
exit_code run_cancel(admin_client& client, const cancel_options& options, std::ostream& out);
// Exits `failed` when some parked instance was refused (listed on `err`).
exit_code run_resume(admin_client& client, const resume_options& options, std::ostream& out,
                     std::ostream& err);
exit_code run_retry(admin_client& client, const retry_options& options, std::ostream& out);
exit_code run_remove_signal(admin_client& client, const remove_signal_options& options,
                            std::ostream& out);
exit_code run_signal(admin_client& client, const signal_options& options, std::ostream& out);
exit_code run_stats(admin_client& client, const stats_options& options, std::ostream& out);
exit_code run_schedules(admin_client& client, const schedules_options& options, std::ostream& out);
exit_code run_queues(admin_client& client, const queues_options& options, std::ostream& out);
exit_code run_schedule(admin_client& client, const schedule_options& options, std::ostream& out);
exit_code run_workers(admin_client& client, const workers_options& options, std::ostream& out);
// Whether the worker answering trusts its process store; with confirm, accepts it.
exit_code run_store(admin_client& client, const store_options& options, std::ostream& out);

}  // namespace keel::cli
