"""The peers bench's second client: the same workloads through the official
MCP Python SDK (`ClientSession.call_tool` over stdio, what real clients pay,
the SDK's validation included).

Run by `cargo bench -p loom-fs-mcp --bench peers` after its raw mode, with
the path of a spec it writes: the servers (command, arguments, environment)
and, per workload, each server's tool and arguments round by round (null
where it has no such tool). Prints one JSON object on stdout, the samples;
the bench renders them as its second table. Needs `pip install mcp`.
"""

import asyncio
import json
import os
import shutil
import sys
import time
from contextlib import AsyncExitStack

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

DEVNULL = open(os.devnull, "w")


def params(server):
    env = dict(os.environ)
    env.update(server["env"])
    return StdioServerParameters(command=server["command"], args=server["args"], env=env)


async def open_session(stack, server):
    read, write = await stack.enter_async_context(stdio_client(params(server), errlog=DEVNULL))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


def result_bytes(result):
    return len(result.model_dump_json(by_alias=True, exclude_none=True))


async def timed_call(session, call):
    """One call: (microseconds, bytes of the result, True or what went wrong)."""
    start = time.perf_counter()
    try:
        result = await session.call_tool(call["tool"], call["arguments"])
    except Exception as e:
        return (time.perf_counter() - start) * 1e6, 0, repr(e)
    elapsed = (time.perf_counter() - start) * 1e6
    if getattr(result, "is_error", False):
        return elapsed, result_bytes(result), result.model_dump_json(by_alias=True, exclude_none=True)
    return elapsed, result_bytes(result), True


async def timed_spawn(server):
    start = time.perf_counter()
    try:
        async with AsyncExitStack() as stack:
            session = await open_session(stack, server)
            elapsed = (time.perf_counter() - start) * 1e6
            size = len(session.initialize_result.model_dump_json(by_alias=True, exclude_none=True)) \
                if getattr(session, "initialize_result", None) is not None else 0
            return elapsed, size, True
    except Exception as e:
        return (time.perf_counter() - start) * 1e6, 0, repr(e)


def inverse(call):
    """An edit call undoing `call` (each edit's two texts swapped)."""
    args = json.loads(json.dumps(call["arguments"]))
    for edit in args["edits"]:
        a, b = list(edit.keys())
        edit[a], edit[b] = edit[b], edit[a]
    return {"tool": call["tool"], "arguments": args}


def new_samples():
    return {"times_us": [], "bytes": [], "errors": 0}


def push(samples, sample):
    """Adds one sample; `ok` is True, or what went wrong."""
    elapsed, size, ok = sample
    samples["times_us"].append(elapsed)
    samples["bytes"].append(size)
    if ok is not True:
        samples["errors"] += 1
        samples.setdefault("first_error", str(ok)[:200])


async def throughput(session, call, calls, in_flight):
    """`calls` calls with `in_flight` outstanding: (calls/s, errors)."""
    gate = asyncio.Semaphore(in_flight)
    errors = 0

    async def one():
        nonlocal errors
        async with gate:
            try:
                result = await session.call_tool(call["tool"], call["arguments"])
                if getattr(result, "is_error", False):
                    errors += 1
            except Exception:
                errors += 1

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return calls / (time.perf_counter() - start), errors


async def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    servers = spec["servers"]
    out = {"workloads": {}}
    async with AsyncExitStack() as stack:
        sessions = [await open_session(stack, s) for s in servers]
        floor_call = {"tool": "list_roots", "arguments": {}}
        # Warm-up: one call of each workload on each server (an edit and
        # its inverse, so the files stand as the rounds expect).
        for w in spec["workloads"]:
            for session, calls in zip(sessions, w["calls"]):
                if calls:
                    await timed_call(session, calls[0])
                    if "edits" in calls[0]["arguments"]:
                        await timed_call(session, inverse(calls[0]))
            if w["cleanup"]:
                for s in servers:
                    shutil.rmtree(s["cleanup"], ignore_errors=True)
        for w in spec["workloads"]:
            per = [None if (calls is None and not w["spawn"]) else new_samples()
                   for calls in w["calls"]]
            floor = new_samples()
            for r in range(w["rounds"]):
                for i, (server, session, calls) in enumerate(zip(servers, sessions, w["calls"])):
                    if w["spawn"]:
                        push(per[i], await timed_spawn(server))
                        continue
                    if calls is None:
                        continue
                    push(per[i], await timed_call(session, calls[r]))
                    if w["cleanup"]:
                        shutil.rmtree(server["cleanup"], ignore_errors=True)
                if w["floor_list_roots"]:
                    push(floor, await timed_call(sessions[0], floor_call))
            out["workloads"][w["key"]] = {"servers": per, "floor": floor}
        t = spec["throughput"]
        if t["rounds"] > 0:
            rates = [[] for _ in servers]
            errors = [0 for _ in servers]
            for _ in range(t["rounds"]):
                for i, (server, session) in enumerate(zip(servers, sessions)):
                    rate, err = await throughput(session, server["throughput"], t["calls"], t["in_flight"])
                    rates[i].append(rate)
                    errors[i] += err
            out["throughput"] = [
                {"calls_per_s": sorted(r)[len(r) // 2], "errors": e} for r, e in zip(rates, errors)
            ]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
