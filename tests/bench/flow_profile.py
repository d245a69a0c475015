#!/usr/bin/env python3
# Where an order flow's CPU goes: reads `perf script` output of a profile that
# keel_orders_load --perf recorded (keel-orders or redis-server, call graphs by DWARF) and
# prints the share of samples by component (the nearest enclosing frame that names one, from
# the leaf outwards) with what burns the cycles inside it (the leaf), and a few cross-cutting
# shares (any frame in the stack). tests/bench/flow_cost.sh profile runs it:
#
#   perf script -i DIR/keel-orders.data -F comm,tid,period,ip,sym,dso | flow_profile.py keel
#   perf script -i DIR/redis-server.data -F comm,tid,period,ip,sym,dso | flow_profile.py redis

import functools
import re
import sys
from collections import Counter, defaultdict

# keel-orders: (component, pattern on a frame's symbol less its template arguments). A sample
# belongs to the component of the nearest frame, from the leaf outwards, that matches one;
# kernel frames never do (a system call counts for its caller), and Asio only when nothing
# else in the stack matches. An awaitable starts a coroutine's socket read or write from
# Asio's frames after the coroutine suspends, so that I/O is Asio's here.
KEEL_COMPONENTS = [
    ("entity locks and documents (repository: lock, save, release, renewal)",
     r"keel::detail::(document_store|lease_state|\(anonymous namespace\)::(keep_alive|send_release))"
     r"|keel::repository<|keel::locked<"),
    ("process store (redis_store: keys, script arguments, replies)", r"keel::process::redis_store"),
    ("engine (drive, commit, wake, runtime, journal, context)", r"keel::process::"),
    ("signals (emit)", r"keel::signals::"),
    ("service code (orders:: controllers and domain)", r"\borders::"),
    ("logging", r"keel::log::|spdlog::"),
    ("dependency injection", r"keel::di::"),
    ("Redis client (keel::redis: encode, parse, socket I/O)", r"keel::redis::|redisReader|^sds"),
    ("HTTP (server, router, middleware, Beast parser and writer)", r"keel::http::|boost::beast::"),
    ("timers, tasks, clock (keel::concurrency, timer queue)",
     r"keel::concurrency::|keel::(system_)?clock|timer_queue"),
]
ASIO = ("Asio alone (scheduler, epoll_wait, handlers, the socket I/O coroutines start)",
        r"boost::asio::|asio_handler")

# redis-server: the first rule, in this order, that any frame of the sample matches.
REDIS_COMPONENTS = [
    ("AOF: appending the commands' effects to the buffer (feedAppendOnlyFile)",
     r"^(feedAppendOnlyFile|catAppendOnly|propagatePendingCommands|propagateNow)"),
    ("AOF: writing and fsync (flushAppendOnlyFile, bio)",
     r"^(flushAppendOnlyFile|aofFsync|bioProcessBackgroundJobs|redis_fsync)"),
    ("commands run by scripts (redis.call)", r"^(luaRedisGenericCommand|luaRedisCallCommand|luaRedisPCallCommand|scriptCall)$"),
    ("Lua: the scripts themselves (VM, arguments, replies)",
     r"^(luaCallFunction|lua_pcall|evalGenericCommand|evalShaCommand|luaCreateArray|luaReplyToRedisReply|luaRedis)"),
    ("commands sent by clients (not scripts)", r"^(call|processCommand)$"),
    ("reading and parsing requests", r"^(readQueryFromClient|processInputBuffer|processMultibulkBuffer)"),
    ("writing replies", r"^(writeToClient|handleClientsWithPendingWrites|_writeToClient|sendReplyToClient)"),
    ("event loop, timers, cron", r"^(aeProcessEvents|aeMain|serverCron|beforeSleep|processTimeEvents|clientsCron|databasesCron)"),
]

LEAF_KINDS = [
    ("kernel", lambda sym, dso: dso.startswith("[kernel")),
    ("malloc/free", lambda sym, dso: re.search(r"malloc|^free$|^cfree|_int_free|_int_malloc|operator new|operator delete|tcache|realloc|je_|^mallocx|^sdallocx|zmalloc|zfree|zrealloc", sym) is not None),
    ("memcpy/memcmp/strlen", lambda sym, dso: re.match(r"__(mem|str)\w*|mem(cpy|move|set|cmp)$|strlen$", sym) is not None),
    ("JSON (nlohmann)", lambda sym, dso: "nlohmann::" in sym),
    ("fmt formatting", lambda sym, dso: sym.startswith("fmt::")),
    ("Beast HTTP", lambda sym, dso: "boost::beast::" in sym),
    ("Asio", lambda sym, dso: "boost::asio::" in sym),
    ("Keel", lambda sym, dso: "keel::" in sym or "orders::" in sym),
    ("libstdc++", lambda sym, dso: sym.startswith("std::") or "libstdc++" in dso),
    ("Keel (lambdas, inlined code)", lambda sym, dso: dso.endswith("/keel-orders")),
    ("hiredis (reply parser)", lambda sym, dso: "hiredis" in dso),
    ("libc (mutexes, system call wrappers, ...)", lambda sym, dso: "libc.so" in dso),
    ("Redis, unexported (Lua VM mostly)",
     lambda sym, dso: sym == "[unknown]" and re.search(r"redis-(server|check)", dso) is not None),
    ("Redis (dict, sds, objects, commands)",
     lambda sym, dso: re.search(r"redis-(server|check)", dso) is not None),
    ("jemalloc", lambda sym, dso: "jemalloc" in dso),
]

CROSS_KEEL = [
    ("any JSON (nlohmann parse, dump, conversions)", r"nlohmann::"),
    ("  JSON parse", r"nlohmann::.*(parser<|::parse\b|lexer<)"),
    ("  JSON dump", r"nlohmann::.*(serializer<|::dump\b)"),
    ("any fmt formatting", r"^fmt::"),
    ("Redis command encoding (hiredis redisFormatCommandArgv, snprintf)", r"redisFormatCommandArgv"),
    ("Redis reply parsing (hiredis reader, keel reply builder)", r"redisReader|reply_reader|reply_builder"),
    ("HTTP parsing (Beast parser)", r"boost::beast::http::(basic_parser|parser)"),
    ("HTTP writing (Beast serializer, async_write, kernel send)", r"boost::beast::http::(serializer|detail::write)"),
    ("HTTP controllers (orders:: *_controller)", r"orders::\w+_controller::"),
    ("entity lock: acquire (document_store::lock, decode)", r"document_store::lock|keel::repository<[^(]*>::lock"),
    ("entity lock: save (locked::save, encode)", r"document_store::save|keel::locked<[^(]*>::save"),
    ("entity lock: release (send_release, renewal timer cancel)", r"document_store::release|send_release"),
    ("entity lock: renewal coroutine (keep_alive)", r"keep_alive"),
    ("engine: drive (handler resumption, run_ready, deliver_event)", r"engine::impl::drive"),
    ("engine: commit / settle / write", r"engine::impl::(commit|settle|write)\b"),
    ("engine: wake (acquire lease, load, rebuild)", r"engine::impl::(wake|make_hot)"),
    ("engine: step execution (execute_run, start_runs)", r"engine::impl::(execute_run|start_runs|run_done)"),
    ("engine: emit and fan-out handling (emit_here, delivered)", r"engine::impl::(emit_here|delivered)"),
    ("engine: wake loop (claim, next_due, renew_leases)", r"engine::impl::(wake_round|wake_loop|renew_leases)"),
    ("process store calls (redis_store::*)", r"keel::process::redis_store::"),
    ("  fan-out of a signal (redis_store::fan_out*)", r"redis_store::fan_out"),
    ("  commits (redis_store::commit, append)", r"redis_store::(commit|append)"),
    ("  load of an instance (redis_store::load)", r"redis_store::load"),
    ("logging (keel::log, spdlog)", r"keel::log::|spdlog::"),
    ("socket sends (kernel sendmsg/sendto/write)", r"^(__x64_sys_sendmsg|__x64_sys_sendto|__x64_sys_write)$"),
    ("socket receives (kernel recvmsg/recvfrom/read)", r"^(__x64_sys_recvmsg|__x64_sys_recvfrom|__x64_sys_read)$"),
    ("epoll_wait (kernel)", r"^do_epoll_wait"),
    ("futex and eventfd wake-ups between threads (kernel)", r"^(__x64_sys_futex|eventfd_write|__x64_sys_eventfd)"),
    ("scheduler: context switches (kernel)", r"^(__schedule|schedule)$"),
]

CROSS_REDIS = [
    ("EVALSHA (the scripts and all they run)", r"^(evalGenericCommand|evalShaCommand)"),
    ("fsync (kernel)", r"^(__x64_sys_fdatasync|__x64_sys_fsync|do_fsync)"),
    ("socket reads and writes (kernel)", r"^(unix_stream_sendmsg|unix_stream_recvmsg|__x64_sys_read|__x64_sys_write|tcp_sendmsg|tcp_recvmsg)"),
    ("epoll_wait (kernel)", r"^(do_epoll_wait)"),
]


def with_dso(frames):
    # An inlined frame has no object of its own: it is in the next frame's.
    dso = ""
    for i in range(len(frames) - 1, -1, -1):
        sym, d = frames[i]
        if d:
            dso = d
        else:
            frames[i] = (sym, dso)
    return frames


def samples(lines):
    frames, period = None, 1
    for line in lines:
        if not line.strip():
            if frames:
                yield period, with_dso(frames)
            frames = None
            continue
        if not line.startswith((" ", "\t")):
            head = line.split()
            period = int(head[2]) if len(head) > 2 and head[2].isdigit() else 1
            frames = []
            continue
        m = re.match(r"\s*[0-9a-f]+ (.*) \((.*)\)$", line.rstrip())
        if m and frames is not None:
            dso = m.group(2)
            frames.append((m.group(1), "" if dso == "inlined" else dso))
    if frames:
        yield period, with_dso(frames)


def leaf_kind(frames):
    sym, dso = frames[0]
    for name, test in LEAF_KINDS:
        if test(sym, dso):
            return name
    return "other (" + (dso.rsplit("/", 1)[-1]) + ")"


# An operator whose name holds angle brackets, where a symbol's own name may have one.
OPERATOR = re.compile(r"operator(<=>|<<=|>>=|<<|>>|<=|>=|->\*?|<|>)")


@functools.lru_cache(maxsize=None)
def without_template_arguments(sym):
    """`a::b<x, c<y> >::f<z>` -> `a::b<>::f<>`: a frame names a component by its own classes
    and function, not by the types it is instantiated with (Asio's handler of a Redis reply,
    which resumes a coroutine that sends an HTTP response, is Asio's code, not the Redis
    client's)."""
    out, depth, i = [], 0, 0
    while i < len(sym):
        op = OPERATOR.match(sym, i) if depth == 0 else None
        if op:
            out.append(op.group(0))
            i = op.end()
            continue
        c = sym[i]
        if c == "<":
            depth += 1
            if depth == 1:
                out.append("<")
        elif c == ">" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(">")
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out)


def keel_component(frames):
    for sym, dso in frames:
        if dso.startswith("[kernel"):
            continue
        own = without_template_arguments(sym)
        for name, pattern in KEEL_COMPONENTS:
            if re.search(pattern, own):
                return name
    if any(re.search(ASIO[1], sym) for sym, _ in frames):
        return ASIO[0]
    if all(dso.startswith("[kernel") for _, dso in frames):
        return "kernel only (interrupts, scheduler)"
    return "other"


def redis_component(frames):
    for name, pattern in REDIS_COMPONENTS:
        if any(re.search(pattern, sym) for sym, _ in frames):
            return name
    if all(dso.startswith("[kernel") for _, dso in frames):
        return "kernel only (interrupts, scheduler)"
    return "other"


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "keel"
    component = keel_component if which == "keel" else redis_component
    cross = CROSS_KEEL if which == "keel" else CROSS_REDIS
    total = 0
    by_component = Counter()
    inside = defaultdict(Counter)
    by_leaf = Counter()
    crossing = Counter()
    for period, frames in samples(sys.stdin):
        if not frames:
            continue
        total += period
        c = component(frames)
        k = leaf_kind(frames)
        by_component[c] += period
        inside[c][k] += period
        by_leaf[k] += period
        for name, pattern in cross:
            if pattern and any(re.search(pattern, s) for s, _ in frames):
                crossing[name] += period
    if total == 0:
        print("no samples")
        return
    pct = lambda n: 100.0 * n / total
    print(f"{which}: {total / 1e9:.3f} s of CPU sampled")
    print("by component (nearest enclosing frame that names one), with the leaves inside it:")
    for c, n in by_component.most_common():
        top = ", ".join(f"{k} {100.0 * m / n:.0f}%" for k, m in inside[c].most_common(4))
        print(f"  {pct(n):5.1f}%  {c}\n          [{top}]")
    print("by leaf (what burns the cycles):")
    for k, n in by_leaf.most_common():
        print(f"  {pct(n):5.1f}%  {k}")
    print("anywhere in the stack:")
    for name, _ in cross:
        print(f"  {pct(crossing[name]):5.1f}%  {name}")


if __name__ == "__main__":
    main()
