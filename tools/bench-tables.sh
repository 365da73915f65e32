#!/bin/sh
# tools/bench-tables.sh — regenerates docs/benchmarks.md's bench/simulate
# tables (issue 26, item 7) with one command, and prints them as markdown:
# every workload (gpt, cnn and each bench/traces/*.gz) at 1.25, 1.5, 2, 3, 4
# and 8x under the schedule, LRU and vdnn, on the h100-pcie5 model; again
# with every kernel 4x slower; and on c2c. Each row's step over Note [Phase
# bound]'s lower bound (simulate_bound.c), the term that bounds it, and the
# bytes moved against the least that must move (the bound's in_min +
# out_min); then each of the issue's targets, met or missed.
#
#   tools/bench-tables.sh [BUILD_DIR]      (build by default) > tables.md
#
# The simulator has no flag that scales compute, so the slower kernels are
# the same workloads written as traces (--dump-trace; a trace as it is)
# with each kernel's ns times 4. gpt and cnn run their default 4 steps, the
# traces the 3 they hold: about a minute on 2 cores. The raw JSON lines are
# left in $OUT (a temporary directory unless set).
set -eu
build=${1:-build}
sim=$build/bench/simulate
[ -x "$sim" ] || { echo "bench-tables: no $sim (build it first)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
ratios=1.25,1.5,2,3,4,8
start=$(date +%s)

# The trace on stdin with every kernel's ns times $1, on stdout.
scaled() {
    awk -v f="$1" '$1 == "kernel" { $2 = $2 * f } { print }'
}

# run NAME LINK SCALE: the rows of every workload into $out/NAME.json.
run() {
    : >"$out/$1.json"
    mkdir -p "$out/$1"
    for w in gpt cnn; do
        if [ "$3" = 1 ]; then
            "$sim" --workload $w --oversub $ratios --link "$2" >>"$out/$1.json"
        else
            "$sim" --workload $w --dump-trace "$out/$1/$w.raw"
            scaled "$3" <"$out/$1/$w.raw" >"$out/$1/$w"
            "$sim" --trace "$out/$1/$w" --oversub $ratios --link "$2" >>"$out/$1.json"
        fi
    done
    for t in "$root"/bench/traces/*.gz; do
        name=$(basename "$t" .trace.gz)
        gzip -dc "$t" | scaled "$3" >"$out/$1/$name"
        "$sim" --trace "$out/$1/$name" --oversub $ratios --link "$2" >>"$out/$1.json"
    done
}

run h100 h100-pcie5 1
run h100_slow h100-pcie5 4
run c2c c2c 1
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo ", with uncommitted changes" || true)
python3 - "$out" "$commit$dirty" "$(($(date +%s) - start))" <<'EOF'
import json, sys, os
out, commit, secs = sys.argv[1], sys.argv[2], sys.argv[3]

def rows(name):
    r = {}
    host = None
    for line in open(os.path.join(out, name + ".json")):
        d = json.loads(line)
        if "host_cpu" in d:
            host = d["host_cpu"]
        if d.get("feasible") is True:
            r[(d["workload"], d["oversub"], d["policy"])] = d
        elif d.get("feasible") is False:
            r[(d["workload"], d["oversub"], None)] = d
    return r, host

def table(title, name, targets):
    r, host = rows(name)
    print(f"**{title}**\n")
    print("| workload | X | bound | schedule ms (÷LB) | lru ms (÷LB) | vdnn ms (÷LB) "
          "| schedule / lru / least GB moved | lru ÷ schedule |")
    print("|---|---|---|---|---|---|---|---|")
    order = []
    for (w, x, p) in r:
        if (w, x) not in order:
            order.append((w, x))
    misses = []
    for (w, x) in order:
        if (w, x, None) in r:
            print(f"| {w} | {x:g} | does not fit | | | | | |")
            continue
        s, l, v = (r.get((w, x, p)) for p in ("schedule", "lru", "vdnn"))
        def cell(d):
            if d is None:
                return ""
            ratio = d["step_over_lower_bound"]
            return f"{d['step_ms']:.1f} ({ratio:.2f})" if ratio is not None else f"{d['step_ms']:.1f}"
        least = (s["in_min_bytes"] + s["out_min_bytes"]) / 1e9
        gb = f"{s['bytes_moved'] / 1e9:.2f} / {l['bytes_moved'] / 1e9:.2f} / {least:.2f}"
        speed = l["step_ms"] / s["step_ms"] if s["step_ms"] > 0 else 0
        print(f"| {w} | {x:g} | {s['bound']} | {cell(s)} | {cell(l)} | {cell(v)} | {gb} | {speed:.3f} |")
        for t in targets:
            miss = t(w, x, s, l, v)
            if miss:
                misses.append(f"{w} {x:g}x: {miss}")
    print()
    return misses, host

def pcie(w, x, s, l, v):
    ratio = s["step_over_lower_bound"] or 1
    want = 1.10 if x <= 4 else 1.25
    slower = [p["policy"] for p in (l, v) if p and p["step_ms"] < s["step_ms"]]
    why = []
    if ratio > want:
        why.append(f"{ratio:.2f} of the bound (target {want:.2f}, bound {s['bound']})")
    if slower:
        why.append("slower than " + " and ".join(slower))
    return "; ".join(why)

def c2c(w, x, s, l, v):
    ratio = s["step_over_lower_bound"] or 1
    if s["bound"] == "compute" and ratio > 1.05:
        return f"compute-bound at {ratio:.2f} of the bound (target 1.05)"
    return ""

results = [
    ("h100-pcie5", table("h100-pcie5 (the default model)", "h100", [pcie])),
    ("h100-pcie5, kernels 4x slower",
     table("h100-pcie5, every kernel 4x slower", "h100_slow", [pcie])),
    ("c2c", table("c2c", "c2c", [c2c])),
]
print("**Targets** (issue 26): on h100-pcie5 the schedule within 1.10 of the bound at"
      " 1.25x to 4x and 1.25 at 8x, never slower than LRU or vdnn; on c2c the"
      " compute-bound rows within 1.05.\n")
for name, (misses, host) in results:
    if misses:
        print(f"- {name}: missed on {len(misses)} rows:")
        for m in misses:
            print(f"  - {m}")
    else:
        print(f"- {name}: met on every row")
host = results[0][1][1]
print(f"\nGenerated by tools/bench-tables.sh at {commit} on {host} in {secs} s.")
EOF
echo "bench-tables: $(($(date +%s) - start)) s; raw rows in $out" >&2
