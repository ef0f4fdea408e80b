#!/usr/bin/env python3
"""Where one tool call's CPU goes, by stage: runs the release server under
`perf record --call-graph dwarf` for N sequential calls over stdio, then
files every sample under the innermost stack frame it recognises.

    python3 scripts/stages.py [N] [TOOL] [ARGS-JSON]    (default: 2000 read_file
    of a 4 KiB file)

Needs `perf` (Debian's linux-perf) and `cargo build --release` first. Prints
each stage's share of the server's samples and its CPU per call (the
server's user+system time over the calls, split by those shares). A
profile, not a benchmark: the benches in host/benches/ measure time."""
import json, os, re, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target/release/loom-fs-mcp")

# Innermost match wins: a readlink under the policing filesystem is the
# policing filesystem's, a memset under instantiate is instantiation's.
STAGES = [
    ("policing filesystem (host side of the guest's file calls)",
     r"loom_fs_mcp::runtime::fs|PolicedFs|wasmtime_wasi"),
    ("guest code", r"wasm\[\d+\]|\.cwasm|component-trampolines"),
    ("instantiate (store, WASI context, instance)",
     r"instantiate|InstancePre|allocate_instance|Instance::new|Store<.*>::new|StoreOpaque::new|WasiCtxBuilder|ResourceTable::new|runtime::call::.*store"),
    ("wasmtime call machinery", r"catch_traps|wasmtime::runtime::component|wasmtime::runtime::vm"),
    ("resolve and locks", r"policy::resolve|resolve_all|resolve_and_lock|store::locks"),
    ("audit log", r"store::audit|audit::"),
    ("result to MCP (tools::results)", r"tools::results|to_result"),
    ("stdio read/write (pipes)", r"server::stdio|mio::sys::unix::pipe|anon_pipe|pipe_read|pipe_write|ksys_write|ksys_read"),
    ("JSON parse and serialise (rmcp, serde_json)", r"serde_json|serde_core|rmcp::model"),
    ("thread hand-offs, waiting (futex, epoll, scheduler)",
     r"futex|__schedule|schedule\b|epoll_wait|park|unpark|wake_up|try_to_wake_up|finish_task_switch|blocking::pool"),
    ("rmcp dispatch", r"rmcp::"),
    ("tools dispatch (Toolbox)", r"loom_fs_mcp::tools"),
    ("tokio", r"tokio::"),
    ("allocator", r"malloc|_int_free|cfree|realloc|__rdl_alloc"),
]
COMPILED = [(name, re.compile(p)) for name, p in STAGES]


def session(tmp, config, tool, args, n, perf_data=None):
    """`n` calls on one server (after 50 to warm it): wall and server CPU
    per call, in µs."""
    command = [BIN, "--config", config, "--allow-root"]
    if perf_data:
        command = ["perf", "record", "-q", "-F", "4000", "--call-graph", "dwarf,16384",
                   "-o", perf_data] + command
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)

    def request(i, method, params):
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                       "params": params}) + "\n")
        server.stdin.flush()
        return server.stdout.readline()

    request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "stages", "version": "0"}})
    server.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    server.stdin.flush()
    for i in range(50):
        request(i + 1, "tools/call", {"name": tool, "arguments": args})
    pid = server.pid
    if perf_data:
        pid = int(subprocess.check_output(["pgrep", "-P", str(server.pid)]).split()[0])

    def cpu():
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    c0, t0 = cpu(), time.perf_counter()
    for i in range(n):
        line = request(1000 + i, "tools/call", {"name": tool, "arguments": args})
        assert '"isError":false' in line, line[:300]
    c1, t1 = cpu(), time.perf_counter()
    server.stdin.close()
    server.wait()
    return (t1 - t0) / n * 1e6, (c1 - c0) / n * 1e6


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    tool = sys.argv[2] if len(sys.argv) > 2 else "read_file"
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {"root": "ws", "path": "page.txt"}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "page.txt"), "w") as f:
            f.write(("x" * 63 + "\n") * 64)
        config = os.path.join(tmp, "config.toml")
        os.makedirs(f"{tmp}/audit")
        with open(config, "w") as f:
            f.write(f'audit_log = "{tmp}/audit/audit.log"\n'
                    f'[[roots]]\nname = "ws"\npath = "{tmp}"\nrole = "workspace"\n')
        # Unprofiled first: the profiler's own cost would swell the figures.
        wall, per_call = session(tmp, config, tool, args, n)
        floor_wall, floor_cpu = session(tmp, config, "list_roots", {}, n)
        data = os.path.join(tmp, "perf.data")
        session(tmp, config, tool, args, n, perf_data=data)
        # Without --no-inline, addr2line takes many minutes.
        done = subprocess.run(["perf", "script", "--no-inline", "-i", data, "-F", "ip,sym"],
                              capture_output=True, text=True)
        if not done.stdout:
            sys.exit(f"perf script printed nothing: {done.stderr.strip()}")
        script = done.stdout
    counts = {name: 0 for name, _ in STAGES}
    counts["other"] = 0
    for sample in script.split("\n\n"):
        frames = [l.strip() for l in sample.splitlines() if l.strip()]
        if not frames:
            continue
        stage = next((name for f in frames for name, rx in COMPILED if rx.search(f)), "other")
        counts[stage] += 1
    total = sum(counts.values())
    print(f"{n} {tool} calls: {wall:.0f} µs each (wall, mean), {per_call:.0f} µs of server "
          f"CPU each; list_roots (same client): {floor_wall:.0f} µs, {floor_cpu:.0f} µs of CPU")
    print(f"the CPU of a {tool} call by stage ({total} samples of a profiled run, warm-up and "
          f"start included, shares applied to the unprofiled CPU):")
    for name, count in sorted(counts.items(), key=lambda kv: -kv[1]):
        share = count / total if total else 0
        print(f"  {share * 100:5.1f}%  {share * per_call:6.1f} µs  {name}")


if __name__ == "__main__":
    main()
