#!/usr/bin/env python3
"""tools/compare-builds.py: what a change must not change, measured against
the build it replaces (issue 25, "measure first").

    tools/compare-builds.py OLD_REV [--rounds N] [--new BUILD] [--out DIR]

Builds OLD_REV (exported with git archive, so the working tree is left
alone) into build/compare/<rev>/, next to the new build (default build/,
built first), then:

  - runs bench/simulate with no arguments in each build: its full output
    must be identical to the byte (the policy's decisions, the placement
    and the model's arithmetic); one line says whether it is, and where the
    two differ the outputs are kept in --out;
  - runs the short forms of bench/alloc, bench/launch (under the preload,
    to the tests' stand-in CUDA), bench/many_chunks and bench/swap, old and
    new in turn (old, new, new, old, ... so that a machine that speeds up or
    slows down during the call favours neither), --rounds times (default 3),
    and prints each figure's median over the rounds for both and their
    ratio, new / old (for times, above 1 is slower; for GB/s, faster).

Output: JSON lines on stdout, each with "bench":"compare". Nothing is
judged: the machine is shared and the figures vary by tens of percent
between runs on a small VM; read the ratios of one call, and repeat it.
Needs git, cmake, and the sim backend (no GPU).
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The figures compared: bench -> (fields that name a line, figures of it).
FIGURES = {
    "alloc": (["case", "size", "threads"], ["lms_ns_p50", "lms_ns_p99"]),
    "launch": (["case"], ["hooked_ns_p50", "hooked_ns_p90"]),
    "many_chunks": (["iteration", "schedule"], ["us_per_access_p50", "us_per_other_access"]),
    "swap": (["direction", "run_bytes"], ["gbps", "gbps_min"]),
}

TARGETS = ["bench_alloc", "bench_simulate", "bench_many_chunks", "bench_swap", "bench_launch",
           "lms", "fake_cuda"]


def say(**fields):
    print(json.dumps(dict(bench="compare", **fields)), flush=True)


def run(cmd, env=None, fatal=True):
    """cmd's stdout; a failure ends the call (fatal) or gives None."""
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.stderr.write("compare-builds: %s failed (exit %d)\n%s" %
                         (" ".join(cmd), out.returncode, out.stderr[-2000:]))
        if fatal:
            sys.exit(1)
        return None
    return out.stdout


def build(src, bdir):
    """Configures and builds the benchmarks of the tree at src into bdir."""
    tarball = run(["sh", os.path.join(ROOT, "tools/fetch-jemalloc.sh"),
                   os.path.join(ROOT, "build/deps")]).strip()
    os.makedirs(bdir, exist_ok=True)
    run(["cmake", "-S", src, "-B", bdir, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
         "-DLMS_JEMALLOC_TARBALL=" + tarball])
    for t in TARGETS:  # one at a time: an older tree may lack one (bench_launch)
        subprocess.run(["cmake", "--build", bdir, "-j", str(os.cpu_count() or 2), "--target", t],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for t in ["bench/simulate", "bench/alloc", "bench/swap", "bench/many_chunks"]:
        if not os.path.exists(os.path.join(bdir, t)):
            sys.exit("compare-builds: %s was not built in %s" % (t, bdir))


def old_tree(rev, base):
    """OLD_REV's files under base/src, exported once."""
    src = os.path.join(base, "src")
    if not os.path.exists(os.path.join(src, "CMakeLists.txt")):
        os.makedirs(src, exist_ok=True)
        archive = subprocess.Popen(["git", "-C", ROOT, "archive", rev], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", src], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            sys.exit("compare-builds: git archive %s failed" % rev)
    return src


def commands(bdir):
    """The short forms, each (name, argv, extra environment)."""
    sim = {"LMS_BACKEND": "sim"}
    cmds = [
        ("alloc", [bdir + "/bench/alloc", "--quick"], sim),
        ("many_chunks", [bdir + "/bench/many_chunks", "--quick"], sim),
        # --quick's 3 reps: what every build since issue 4 takes (--reps came with issue 24)
        ("swap", [bdir + "/bench/swap", "--quick", "--run=2MiB"], dict(sim, LMS_POLICY="schedule")),
    ]
    lib = bdir + "/liblms.so"
    if os.path.exists(bdir + "/bench/launch") and os.path.exists(lib):
        cmds.append(("launch", [bdir + "/bench/launch", "--quick"],
                     dict(sim, LD_PRELOAD=lib, LMS_DEVICE_LIMIT="64MiB", LMS_HOST_LIMIT="256MiB")))
    return cmds


def figures(name, text):
    """{(line's name): {figure: value}} from a bench's JSON lines."""
    keys, figs = FIGURES[name]
    found = {}
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        got = {f: d[f] for f in figs if isinstance(d.get(f), (int, float))}
        if got:
            found[tuple((k, d.get(k)) for k in keys)] = got
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old_rev")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--new", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build/compare"))
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("compare-builds: --rounds must be at least 1")
    rev = run(["git", "-C", ROOT, "rev-parse", "--short", a.old_rev]).strip()
    head = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip()
    dirty = run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).strip() != ""
    base = os.path.join(a.out, rev)
    old = os.path.join(base, "build")
    build(old_tree(rev, base), old)
    build(ROOT, a.new)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    machine = dict(host_cpu=cpu, host_cores=os.cpu_count(), old_rev=rev,
                   new_rev=head + ("+changes" if dirty else ""))

    outs = [run([b + "/bench/simulate"], env=dict(os.environ, LMS_BACKEND="sim")) for b in (old, a.new)]
    same = outs[0] == outs[1]
    where = None
    if not same:
        for path, text in zip(("simulate.old.txt", "simulate.new.txt"), outs):
            with open(os.path.join(base, path), "w") as f:
                f.write(text)
        lines = [t.splitlines() for t in outs]
        where = next((i + 1 for i, (x, y) in enumerate(zip(*lines)) if x != y),
                     min(map(len, lines)) + 1)
    say(check="simulate_output", identical=same, bytes_old=len(outs[0]), bytes_new=len(outs[1]),
        first_different_line=where, kept=None if same else base, **machine)

    cmds = {"old": commands(old), "new": commands(a.new)}
    seen = {"old": {}, "new": {}}  # (name, line, figure) -> [values]
    for r in range(a.rounds):
        for which in (("old", "new") if r % 2 == 0 else ("new", "old")):
            for name, argv, extra in cmds[which]:
                text = run(argv, env=dict(os.environ, **extra), fatal=False)
                if text is None:
                    say(name=name, build=which, failed=" ".join(argv), round=r, **machine)
                    continue
                for line, figs in figures(name, text).items():
                    for f, v in figs.items():
                        seen[which].setdefault((name, line, f), []).append(v)
    for key in sorted(seen["new"], key=str):
        if key not in seen["old"]:
            continue
        name, line, f = key
        o, n = statistics.median(seen["old"][key]), statistics.median(seen["new"][key])
        say(name=name, line=dict(line), figure=f, old=o, new=n,
            ratio=round(n / o, 3) if o else None, rounds=a.rounds, **machine)


if __name__ == "__main__":
    main()
