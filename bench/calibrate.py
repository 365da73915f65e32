#!/usr/bin/env python3
"""bench/calibrate.py — the simulator's prediction beside what the card did.

bench/simulate says how fast a training step runs at a ratio X (footprint
over device memory) on a link model (--link, h100-pcie5 by default); this
puts that beside bench/gpt2.py's measured rows for the same model, the same
device limit and the same card, which is the simulator's calibration
(issue 26; the figures go to docs/gpu-results.md):

  python3 bench/calibrate.py [--results OUT/results.jsonl] [--simulate build/bench/simulate]
      [--link h100-pcie5] [--gpu NAME] [--out DIR] [gpt2.py suite options...]

1. The measured side: a gpt2.py suite's results.jsonl (--results), or, without
   it, the suite run here with --runs lms,uvm,uvm_prefetch and the suite
   options given (--small, the shape, --ratios, --steps, --lib, --uvm-lib,
   --timeout). Its plain run, "lms unlimited", and at each ratio X the lms,
   uvm and uvm_prefetch runs at the device limit L = F / X it used.
2. The same model's step recorded as a trace: tools/lms-trace-torch.py
   gpt2:trace_model (bench/gpt2.py's own model, its shape in LMS_GPT2_SHAPE),
   3 steps on the meta device, kernel times a roofline of --gpu (by default
   the card's, from its name; h100-pcie when the name says nothing).
3. bench/simulate --trace at --device L (lms's policy, schedule), and again
   with every kernel's time scaled so that the step's compute is the plain
   run's measured step ("..._at_measured_compute": the link and VMM model
   alone, the roofline's error taken out).

Prints, per ratio, one JSON line {"bench":"calibrate","oversub":X,...} with
measured_*_ms (median step times), predicted_* (the simulator's row), and
lms_over_predicted and lms_over_predicted_at_measured_compute (1.0: the
model is right). What the recorder cannot see (cuBLAS workspaces, the
caching allocator's rounding), and lms's placement, which the simulator
follows, make its footprint differ from the card's F: both are printed
(footprint_card, footprint_simulated), and the simulator's own oversub.

  python3 bench/calibrate.py --predict-only [--small | shape] [--ratios 2]

needs no card: records the model and prints the prediction at --oversub X
(the trace's own footprint over X), measured fields null. Exit status 77
where this python3 has no torch (the recorder needs it), 2 on bad options,
1 when a step fails.
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SKIP = 77
sys.path.insert(0, HERE)
import gpt2  # noqa: E402  (the shape's defaults and the suite's own options)

# The roofline's GPU (tools/lms-trace-torch.py --gpu) from the card's name:
# the first pattern the name matches.
GPUS = ((r"H100.*PCIe", "h100-pcie"), (r"H100", "h100-sxm"), (r"H200", "h200"), (r"A100", "a100"))


def gpu_of(device):
    return next((gpu for pattern, gpu in GPUS if re.search(pattern, device or "")), None)


def die(msg, status=1):
    print(f"bench/calibrate.py: {msg}", file=sys.stderr, flush=True)
    sys.exit(status)


def measured_rows(a):
    """The suite's lines: its results file, or those of a suite run now."""
    path = a.results
    if path is None:
        cmd = [sys.executable, os.path.join(HERE, "gpt2.py"), "suite", "--runs", "lms,uvm,uvm_prefetch",
               "--out", a.out, "--lib", a.lib, "--uvm-lib", a.uvm_lib, "--timeout", str(a.timeout),
               "--ratios", ",".join(str(x) for x in a.ratios)]
        cmd += [arg for k in gpt2.FULL if getattr(a, k) is not None for arg in (f"--{k}", str(getattr(a, k)))]
        cmd += ["--small"] if a.small else []
        rc = subprocess.run(cmd).returncode  # its lines go to stdout as they come
        if rc == SKIP:
            sys.exit(SKIP)
        path = os.path.join(a.out, "results.jsonl")
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        die(f"{path}: {e}")


def record(a, shape, gpu):
    """The model's step as a trace (gzipped) in a.out: its path and the peak of live bytes."""
    trace = os.path.join(a.out, "gpt2_calibrate.trace.gz")
    rest = {k: shape[k] for k in ("layers", "width", "heads", "vocab")}
    env = dict(os.environ, LMS_GPT2_SHAPE=json.dumps(rest))
    cmd = [sys.executable, os.path.join(ROOT, "tools", "lms-trace-torch.py"), "gpt2:trace_model",
           "--batch", str(shape["batch"]), "--seq", str(shape["seq"]), "--steps", "3", "--gpu", gpu,
           "-o", trace]
    if subprocess.run(cmd, cwd=HERE, env=env).returncode != 0:  # cwd: `gpt2` is bench/gpt2.py
        die("tools/lms-trace-torch.py failed (its message above)")
    with gzip.open(trace, "rt") as f:
        peak = next((int(line.split()[-1]) for line in f if line.startswith("# peak of live bytes")), None)
    return trace, peak


def scaled(trace, factor, out):
    """A copy of trace with every kernel's time times factor."""
    with gzip.open(trace, "rt") as f, gzip.open(out, "wt") as g:
        for line in f:
            m = re.match(r"(\s*kernel\s+)(\d+)(.*)", line, re.S)
            g.write(f"{m[1]}{max(1, round(int(m[2]) * factor))}{m[3]}" if m else line)
    return out


def simulate(a, trace, size_args):
    """bench/simulate's row for lms's policy on trace: a dict."""
    cmd = [a.simulate, "--trace", trace, "--policy", "schedule", "--link", a.link, *size_args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    row = next((r for r in rows if "feasible" in r), None)
    if p.returncode != 0 or row is None:
        die(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
    return row


def step_ms(r):
    return r.get("step_ms_median") if r and r.get("ok") else None


def ratio(x, y):
    return round(x / y, 3) if x is not None and y else None


def predicted(row, suffix=""):
    keys = ("step_ms", "compute_ms", "stall_ms", "bound", "bytes_moved", "device_bytes")
    if not row.get("feasible"):
        return {f"predicted_feasible{suffix}": False, f"predicted_reason{suffix}": row.get("reason")}
    return {f"predicted_{k}{suffix}": row.get(k) for k in keys}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpt2.model_args(p)
    p.add_argument("--ratios", type=lambda t: [float(v) for v in t.split(",")], default=[2.0])
    p.add_argument("--results", help="a gpt2.py suite's results.jsonl (else the suite runs here)")
    p.add_argument("--predict-only", action="store_true", help="no card: the prediction alone")
    p.add_argument("--simulate", default=os.path.join(ROOT, "build", "bench", "simulate"))
    p.add_argument("--link", default="h100-pcie5", help="bench/simulate's --link (h100-pcie5)")
    p.add_argument("--gpu", help="the roofline's GPU (lms-trace-torch.py --gpu); the card's by default")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "calibrate"))
    p.add_argument("--lib", default=os.path.join(ROOT, "build", "liblms.so"))
    p.add_argument("--uvm-lib", default=os.path.join(ROOT, "build", "bench", "libuvm_alloc.so"))
    p.add_argument("--timeout", type=float, default=0, help="gpt2.py's seconds a run may take")
    a = p.parse_args()
    if a.predict_only and a.results:
        p.error("--predict-only takes no --results")
    if not os.access(a.simulate, os.X_OK):
        die(f"no {a.simulate}: build bench/simulate first", 2)
    try:
        import torch  # noqa: F401  (the recorder's; checked before a suite runs for nothing)
    except ImportError:
        die(f"skipped: {sys.executable} has no torch (tools/lms-trace-torch.py needs it)", SKIP)
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)

    rows = [] if a.predict_only else measured_rows(a)
    env = next((r for r in rows if r.get("case") == "environment"), {})
    runs = {r["run"]: r for r in rows if "run" in r}
    summaries = [r for r in rows if r.get("case") == "summary"]
    if not a.predict_only and not summaries:
        die("the suite's results have no summary line: no ratio ran")
    shape = dict(env.get("shape") or {})
    if not shape:  # predict-only: the shape from the options, as gpt2.py resolves it
        gpt2.resolve_shape(a)
        shape = {k: getattr(a, k) for k in gpt2.FULL}
    gpu = a.gpu or gpu_of(env.get("device")) or "h100-pcie"
    trace, peak = record(a, shape, gpu)
    print(json.dumps({"bench": "calibrate", "case": "trace", "trace": trace, "peak_bytes": peak,
                      "gpu": gpu, "device": env.get("device"), "link": a.link, "shape": shape}), flush=True)

    plain = runs.get("plain")
    plain_ms = step_ms(plain)
    for x, s in ([(x, None) for x in a.ratios] if a.predict_only else [(s["oversub"], s) for s in summaries]):
        size = ["--oversub", str(x)] if s is None else ["--device", str(s["device_limit"])]
        row = simulate(a, trace, size)
        line = {"bench": "calibrate", "oversub": x, "device_limit": s and s["device_limit"], "link": a.link,
                "gpu": gpu, "policy": "schedule", "footprint_card": s and s["footprint"],
                "footprint_simulated": row.get("footprint_bytes"), "oversub_simulated": row.get("oversub"),
                "measured_plain_ms": plain_ms,
                "measured_lms_unlimited_ms": step_ms(runs.get("lms unlimited"))}
        for kind in ("lms", "uvm", "uvm_prefetch"):
            line[f"measured_{kind}_ms"] = step_ms(runs.get(f"{kind} {x}x"))
        line.update(predicted(row))
        compute = row.get("compute_ms")
        if plain_ms and compute:  # the roofline's error taken out
            factor = plain_ms / compute
            copy = os.path.join(a.out, f"gpt2_calibrate_x{factor:.3f}.trace.gz")
            at = simulate(a, scaled(trace, factor, copy), size)
            line["kernel_scale"] = round(factor, 4)
            line.update(predicted(at, "_at_measured_compute"))
        line["lms_over_predicted"] = ratio(line["measured_lms_ms"], line.get("predicted_step_ms"))
        line["lms_over_predicted_at_measured_compute"] = ratio(
            line["measured_lms_ms"], line.get("predicted_step_ms_at_measured_compute"))
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
