#!/usr/bin/env bash
# The history library against the git CLI on a generated repository of
# COMMITS commits (default 10000) over 200 files in 10 directories, packed by
# `git gc`: `git log -n 50 --stat`, `git log -n 500 --stat`, `git show`,
# `git show REV:PATH` and `git blame`, each as a process (spawn included),
# against examples/probe.rs precompiled and run by the standalone wasmtime CLI
# (process spawn and wasmtime start included; inside loom-fs a call costs the
# guest's own time, which the probe prints as "total"). The outputs of
# `blame` and `log -n 50 --numstat` are compared with git's first (a
# difference stops it). Needs git, python3 and wasmtime on PATH
# (scripts/test installs one in .tools/bin). Not run by CI: figures, not a
# pass/fail.
set -euo pipefail
commits=${1:-10000}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$here/.." && cargo build --quiet --locked --release --target wasm32-wasip2 -p git-history --example probe)
# git from here on: no system or user configuration.
export GIT_CONFIG_NOSYSTEM=1 HOME=$work LC_ALL=C
wasm=$here/../target/wasm32-wasip2/release/examples/probe.wasm
wasmtime compile "$wasm" -o "$work/probe.cwasm"
git init -q -b main "$work/r"
python3 - "$commits" <<'PY' | git -C "$work/r" fast-import --quiet
import random, sys
random.seed(7)
files = 200
content = {f: [f"line {i} of file {f}\n" for i in range(60)] for f in range(files)}
out = sys.stdout.buffer
t = 1_600_000_000
for c in range(int(sys.argv[1])):
    t += 600
    out.write(b"commit refs/heads/main\n")
    out.write(b"author Ada <ada@example.com> %d +0000\n" % t)
    out.write(b"committer Bench <bench@example.com> %d +0000\n" % t)
    message = b"commit %d\n\nbody\n" % c
    out.write(b"data %d\n" % len(message) + message)
    for f in random.sample(range(files), random.randint(1, 3)):
        lines = content[f]
        i = random.randrange(len(lines))
        if random.random() < 0.5:
            lines[i] = f"changed {c} in {f}\n"
        else:
            lines.insert(i, f"inserted {c}\n")
        data = "".join(lines).encode()
        out.write(b"M 100644 inline dir%d/file%d.txt\n" % (f % 10, f))
        out.write(b"data %d\n" % len(data) + data)
PY
git -C "$work/r" gc -q
git -C "$work/r" checkout -q main
probe() { wasmtime run --allow-precompiled --dir "$work/r/.git::/git" "$work/probe.cwasm" /git "$@"; }
ms() { # median of 9 runs of a command, in ms
  local runs=()
  for _ in 1 2 3 4 5 6 7 8 9; do
    local s=$(date +%s%N)
    "$@" >/dev/null 2>&1
    runs+=($(( ($(date +%s%N) - s) / 1000000 )))
  done
  printf '%s\n' "${runs[@]}" | sort -n | sed -n 5p
}
guest() { # median of the probe's own "total" (the guest's time), in ms
  for _ in 1 2 3 4 5 6 7 8 9; do probe "$@" 2>&1 >/dev/null | sed -n 's/.*total \([0-9.]*\)\(m\?s\)$/\1 \2/p'; done |
    awk '{printf "%.1f\n", ($2 == "s") ? $1 * 1000 : $1}' | sort -n | sed -n 5p
}
row() {
  local name=$1 git_args=$2 probe_args=$3
  # shellcheck disable=SC2086
  printf '%-38s %10s %12s %12s\n' "$name" "$(ms git -C "$work/r" $git_args)" "$(ms probe $probe_args)" "$(guest $probe_args)"
}
table() {
  git -C "$work/r" blame --porcelain HEAD -- dir3/file13.txt | grep -E '^[0-9a-f]{40} ' | cut -d' ' -f1,2 >"$work/theirs"
  probe blame HEAD dir3/file13.txt 2>/dev/null >"$work/ours"
  cmp -s "$work/ours" "$work/theirs" || { echo "blame differs from git's" >&2; exit 1; }
  git -C "$work/r" log -n 50 --numstat --no-renames --format='%H %s' | grep -v '^$' >"$work/theirs"
  probe log 50 2>/dev/null >"$work/ours"
  cmp -s "$work/ours" "$work/theirs" || { echo "log differs from git's" >&2; exit 1; }
  printf '%-38s %10s %12s %12s\n' "$1" "git (ms)" "probe (ms)" "guest (ms)"
  row "log -n 50 --stat" "log -n 50 --stat" "log 50"
  row "log -n 500 --stat" "log -n 500 --stat" "log 500"
  row "show HEAD~5" "show HEAD~5" "show HEAD~5"
  row "show HEAD:dir3/file13.txt" "show HEAD:dir3/file13.txt" "cat HEAD dir3/file13.txt"
  row "blame dir3/file13.txt" "blame HEAD -- dir3/file13.txt" "blame HEAD dir3/file13.txt"
}
# fast-import deltifies each version against the one before (older objects
# as bases, chains 50 deep), which `git gc` keeps; gitoxide's delta cache
# keeps only the objects asked for, so a walk from the newest commit
# resolves whole chains again. Then the same history repacked with git's
# own choice of bases (`repack -f`), as a repository grown by commits is.
table "$commits commits, fast-import deltas"
git -C "$work/r" repack -q -a -d -f
table "$commits commits, repack -a -d -f"
echo "probe.wasm: $(stat -c %s "$wasm") bytes"
