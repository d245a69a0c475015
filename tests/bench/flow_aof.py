#!/usr/bin/env python3
# Where an order flow's AOF bytes go: reads an AOF that keel_orders_load --keep-aof DIR copied
# (the commands Redis appended, in the Redis protocol) and prints bytes and commands per flow
# by what they write, from the keys' names (keel-orders' and the floor's keys are named alike).
#
#   keel_orders_load --aof everysec --rounds 1 --reads 0 --keep-aof /tmp/aof
#   tests/bench/flow_aof.py /tmp/aof/keel.aof 1000      # FLOWS: --orders
#   tests/bench/flow_aof.py /tmp/aof/floor.aof 5000     # --floor-flows

import sys
from collections import Counter


def commands(data):
    i = 0
    while i < len(data):
        start = i
        end = data.index(b"\r\n", i)
        n = int(data[i + 1:end])
        i = end + 2
        args = []
        for _ in range(n):
            end = data.index(b"\r\n", i)
            length = int(data[i + 1:end])
            i = end + 2
            args.append(data[i:i + length].decode(errors="replace"))
            i += length + 2
        yield args, i - start


def kind(args):
    name = args[0].upper()
    if name in ("MULTI", "EXEC"):
        return "MULTI/EXEC around a script's effects"
    if len(args) < 2:
        return name
    key, field = args[1], args[2] if len(args) > 2 else ""
    if key.endswith((":lock", ":fence")):
        return "entity locks (INCR fence, SET lock, DEL lock)"
    if key.endswith(":doc"):
        return "order document (SET)"
    if ":idx:" in key:
        return "operators' index (status sets, counts, expiring, final)"
    if key.endswith(":wake"):
        return "wake / timer index (ZADD, ZREM)"
    if ":sub:" in key:
        return "subscriptions (HSET, HDEL; SADD, SREM in keys from before store level 4)"
    if ":fan_out:" in key:
        return "fan-out memo (SET)"
    if name.startswith("PEXPIRE"):
        return "retention (PEXPIREAT)"
    if key.endswith(":journal"):
        return "journal (RPUSH)"
    if key.endswith((":inbox", ":inbox_idx", ":keys")):
        return "inbox: signal, its index, idempotency key"
    if key.endswith(":timers"):
        return "timers"
    if key.endswith(":meta"):
        if name == "HINCRBY":
            return "instance hash: counters (epoch, next_inbox)"
        if field.startswith("lease"):
            return "instance hash: lease fields"
        return "instance hash: status, wait set, result, creation"
    return name + " (other)"


def main():
    path, flows = sys.argv[1], float(sys.argv[2])
    data = open(path, "rb").read()
    size, count = Counter(), Counter()
    for args, n in commands(data):
        k = kind(args)
        size[k] += n
        count[k] += 1
    total = sum(size.values())
    print(f"{path}: {len(data)} bytes, {total / flows:.0f} bytes and "
          f"{sum(count.values()) / flows:.1f} commands per flow")
    for k, n in size.most_common():
        print(f"  {n / flows:7.0f} B  {100.0 * n / total:5.1f}%  {count[k] / flows:5.1f} cmds  {k}")


if __name__ == "__main__":
    main()
