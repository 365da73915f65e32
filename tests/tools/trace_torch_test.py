#!/usr/bin/env python3
"""tests/tools/trace_torch_test.py TOOL SIMULATE -- checks tools/lms-trace-torch.py (CTest's
tools.trace_torch): each built-in model, scaled down (--small), recorded on the meta device
and again on cpu with real tensors, must give the same trace, line for line (allocations,
frees, kernels with their times and accesses, hints, iteration marks); on cpu, the bytes
the trace has live after each step must be what the run really holds then (the model's
parameters and buffers and the optimizer's state, counted from the objects themselves);
and the meta trace must replay in bench/simulate --check. Exit 77 (skipped) without
torch; the torchvision models are skipped without torchvision."""
import gzip
import importlib.util
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIPPED: no torch (Debian: apt-get install python3-torch python3-torchvision)")
    sys.exit(77)

tool, simulate = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("lms_trace_torch", tool)
lt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lt)
failed = []


def held_bytes(model, opt):
    """Bytes of the distinct storages the model and optimizer hold (of a dimension or more)."""
    seen, total = set(), 0
    tensors = list(model.parameters()) + list(model.buffers())
    for state in opt.state.values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    for t in tensors:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage().untyped()
        if t.dim() > 0 and t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += st.nbytes()
    return total


def live_at_marks(rec):
    live, out = {}, []
    for ln in rec.lines:
        if ln[0] == "alloc":
            live[ln[1]] = ln[2]
        elif ln[0] == "free":
            del live[ln[1]]
        elif ln[0] == "iteration":
            out.append(sum(live.values()))
    return out


def run(name, device, steps=2):
    torch.manual_seed(0)
    model, batch, loss_fn, make_opt = lt.builtin(torch, name, None, None, True)
    model, inputs, target, opt = lt.prepare(torch, model, batch, make_opt, device, torch.float32)
    rec = lt.make_recorder(torch, device, "h100-pcie")
    held = []
    for _ in range(steps):  # a step at a time, to count what is held after each
        lt.train(torch, model, inputs, target, loss_fn, opt, 1, rec)
        held.append(held_bytes(model, opt))
    return rec, held


with tempfile.TemporaryDirectory() as tmp:
    for name in lt.MODELS:
        try:
            meta, _ = run(name, "meta")
        except ImportError as e:
            print("%s: skipped (%s)" % (name, e))
            continue
        cpu, held = run(name, "cpu")
        if meta.lines != cpu.lines:
            i = next((i for i, (a, b) in enumerate(zip(meta.lines, cpu.lines)) if a != b),
                     min(len(meta.lines), len(cpu.lines)))
            failed.append("%s: the meta and cpu traces differ from statement %d: %s against %s"
                          % (name, i, meta.lines[i:i + 1], cpu.lines[i:i + 1]))
        marks = live_at_marks(cpu)
        if marks != held:
            failed.append("%s: live bytes at the iteration marks %s, the run held %s"
                          % (name, marks, held))
        path = os.path.join(tmp, name + ".trace.gz")
        with gzip.open(path, "wt") as f:
            meta.write(f, [name])
        sim = subprocess.run([simulate, "--check", "--trace", path], capture_output=True,
                             text=True)
        if sim.returncode != 0 or '"check":"passed"' not in sim.stdout:
            failed.append("%s: bench/simulate --check failed: %s%s" % (name, sim.stdout[-500:],
                                                                      sim.stderr[-500:]))
        print("%s: %d statements, the same on meta and cpu: %s; live bytes after each step %s"
              % (name, len(meta.lines), meta.lines == cpu.lines, marks))
for f in failed:
    print("FAILED: " + f)
sys.exit(1 if failed else 0)
