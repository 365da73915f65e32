#!/usr/bin/env python3
"""bench/calibrate_test.py SIMULATE DIR — bench/calibrate.py's two halves
without a card (CTest bench.calibrate; a python3 with torch, for the
recorder): the small model at 2x.

1. --predict-only: a line per ratio, the prediction filled in, the measured
   fields null.
2. --results: a suite's results.jsonl as gpt2.py writes it on a card (made
   up here: an H100 PCIe, plain 20 ms a step, lms at 2x 60 ms, uvm failed)
   must give the lms row against the prediction at the suite's device
   limit, on the roofline of the card named (h100-pcie), and a second
   prediction whose compute is the plain run's measured step.
"""
import gzip
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def expect(ok, what):
    print(("ok: " if ok else "FAILED: ") + what, flush=True)
    if not ok:
        failures.append(what)


def calibrate(simulate, out, *args):
    p = subprocess.run([sys.executable, os.path.join(HERE, "calibrate.py"), "--simulate", simulate,
                        "--out", out, *args], capture_output=True, text=True)
    sys.stderr.write(p.stderr)
    print(p.stdout, end="", flush=True)
    if p.returncode != 0:
        sys.exit(f"calibrate.py {' '.join(args)}: exit {p.returncode}")
    return [json.loads(line) for line in p.stdout.splitlines()]


def main():
    simulate, out = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(out, exist_ok=True)

    rows = calibrate(simulate, os.path.join(out, "predict"), "--predict-only", "--small", "--ratios", "2")
    ratio_rows = [r for r in rows if "oversub" in r]
    expect(len(ratio_rows) == 1 and ratio_rows[0]["oversub"] == 2.0, "--predict-only: one row, at 2x")
    r = ratio_rows[0]
    expect((r.get("predicted_step_ms") or 0) >= (r.get("predicted_compute_ms") or 0) > 0,
           "--predict-only: a step predicted, no shorter than its compute")
    expect(r["measured_lms_ms"] is None and r["lms_over_predicted"] is None,
           "--predict-only: nothing measured")

    limit, plain_ms, lms_ms = 300 << 20, 20.0, 60.0
    shape = {"layers": 4, "width": 256, "heads": 4, "seq": 256, "batch": 8, "vocab": 2048, "steps": 4}
    suite = [{"bench": "gpt2", "case": "environment", "device": "NVIDIA H100 PCIe", "shape": shape},
             {"bench": "gpt2", "run": "plain", "ok": True, "step_ms_median": plain_ms},
             {"bench": "gpt2", "run": "lms unlimited", "ok": True, "step_ms_median": 21.0},
             {"bench": "gpt2", "run": "lms 2.0x", "ok": True, "step_ms_median": lms_ms},
             {"bench": "gpt2", "run": "uvm 2.0x", "ok": False, "error": "timeout after 90 s"},
             {"bench": "gpt2", "case": "summary", "oversub": 2.0, "device_limit": limit,
              "footprint": 2 * limit}]
    results = os.path.join(out, "results.jsonl")
    with open(results, "w") as f:
        f.writelines(json.dumps(line) + "\n" for line in suite)
    rows = calibrate(simulate, os.path.join(out, "measured"), "--results", results)
    trace = next((r for r in rows if r.get("case") == "trace"), {})
    expect(trace.get("gpu") == "h100-pcie", "the roofline's GPU from the card's name")
    with gzip.open(trace["trace"], "rt") as f:
        header = f.read(400)
    expect("--gpu h100-pcie" in header and "batch 8, seq 256" in header,
           "the trace recorded with that GPU and the suite's batch and sequence")
    r = next((r for r in rows if "oversub" in r), {})
    expect(limit - (2 << 20) < (r.get("predicted_device_bytes") or 0) <= limit,
           "simulated at the suite's device limit (to a chunk)")
    expect(r.get("measured_lms_ms") == lms_ms and r.get("measured_plain_ms") == plain_ms
           and r.get("measured_uvm_ms") is None, "the measured rows: lms and plain, uvm failed")
    expect(r.get("lms_over_predicted") == round(lms_ms / r["predicted_step_ms"], 3),
           "lms_over_predicted is the measured step over the predicted one")
    at = r.get("predicted_compute_ms_at_measured_compute") or 0
    expect(abs(at - plain_ms) < 0.01 * plain_ms,
           f"the second prediction's compute is the plain run's step ({at} ms against {plain_ms})")
    expect(r.get("lms_over_predicted_at_measured_compute")
           == round(lms_ms / r["predicted_step_ms_at_measured_compute"], 3),
           "and lms is set beside it")
    print(f"{len(failures)} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
