#!/usr/bin/env python3
"""The code each call executed, from callgrind dumps made with --dump-instr=yes, one per
call: the distinct 64-byte cache lines holding an instruction that ran in every call, in
all and by crate, and those that ran in some calls only (housekeeping, timers).

After a pause (the sidecar waits about 40 ms for Zabbix's PHP on every call) the CPU
finds little of this in its caches, so each line is a miss to fetch again: a figure for
the cold cost that, like the instruction count, does not depend on the machine's load.
A line is counted once however often it ran, and credited to the crate of the function
it belongs to after inlining (code inlined into our functions counts as ours).

    python3 scripts/perf/footprint.py callgrind.out.1 [callgrind.out.2 ...]
"""
import collections
import re
import sys


TOP = 12


def main():
    calls = [executed_lines(path) for path in sys.argv[1:]]
    if not calls:
        sys.exit("usage: footprint.py CALLGRIND_DUMP...")
    every = set.intersection(*(set(call) for call in calls))
    some = set.union(*(set(call) for call in calls)) - every
    print(f"code every one of {len(calls)} calls executed: {kib(len(every))}")
    functions = {}
    for call in calls:
        functions.update(call)
    by_crate = collections.Counter(crate(functions[line]) for line in every)
    for name, count in by_crate.most_common(TOP):
        print(f"  {count:6d} lines {count * 64 / 1024:7.1f} KiB  {name}")
    print(f"code some of them executed: {kib(len(some))}")


def kib(lines):
    return f"{lines} cache lines of 64 bytes ({lines * 64 / 1024:.0f} KiB)"


def executed_lines(path):
    """Cache line -> the (first seen) function whose instruction in it ran."""
    names = {}
    function = None
    position = 0
    call_cost_follows = False
    lines = {}
    with open(path) as dump:
        for raw in dump:
            line = raw.rstrip("\n")
            if line.startswith("fn="):
                function = name(line[3:], names)
            elif line.startswith("cfn="):
                name(line[4:], names)
            elif line.startswith("calls="):
                # The next cost line is the call's inclusive cost, not this function's.
                call_cost_follows = True
            elif line[:1] in "0123456789+-*" and line:
                fields = line.split()
                position = address(fields[0], position)
                if call_cost_follows:
                    call_cost_follows = False
                elif len(fields) > 2 and int(fields[2]) > 0:
                    lines.setdefault(position >> 6, function)
    if not lines:
        sys.exit(f"{path}: no instruction positions (made without --dump-instr=yes?)")
    return lines


def name(field, names):
    """callgrind's name compression: "(id) name" defines, "(id)" refers."""
    match = re.match(r"\((\d+)\)(?: (.*))?$", field)
    if not match:
        return field
    if match.group(2) is not None:
        names[match.group(1)] = match.group(2)
    return names.get(match.group(1), "?")


def address(field, previous):
    if field.startswith("0x"):
        return int(field, 16)
    if field.startswith("+"):
        return previous + int(field[1:], 0)
    if field.startswith("-"):
        return previous - int(field[1:], 0)
    return previous  # "*": the same position


def crate(function):
    function = function or "?"
    if function.startswith(("mi_", "_mi_", "__mem", "__libc", "_int_")) or function in ("malloc", "free"):
        return "libc and mimalloc"
    match = re.search(r"(?:^|<)([A-Za-z_][A-Za-z0-9_]*)::", function)
    return match.group(1) if match else "other (libc, vdso, unnamed)"


if __name__ == "__main__":
    main()
