#!/usr/bin/env python3
"""bench/gpt2.py — a GPT-2-style model trained by unmodified PyTorch under lms.

Needs a CUDA GPU, PyTorch and build/liblms.so. Nothing is downloaded: the
weights are random (seeded) and the tokens too. Every run is its own process,
so that the preload, the limit and the allocator are each run's own:

  python3 bench/gpt2.py suite [--steps N] [--ratios 2] [--lib build/liblms.so]
      [--layers 24 --width 1024 --heads 16 --seq 1024 --batch 8 --vocab 50257]

runs, for the model given (default: GPT-2 medium's shape, batch 8 x 1024):
  plain        PyTorch alone, no limit: the reference losses, step time, and
               the footprint F = torch.cuda.max_memory_allocated();
  lms          under LD_PRELOAD=liblms.so with no limit (the same losses?);
then for each ratio X, with a limit of L = F / X:
  lms          LD_PRELOAD=liblms.so, LMS_DEVICE_LIMIT=L, PyTorch's caching off
               (PYTORCH_NO_CUDA_MEMORY_CACHING=1: each tensor is an lms
               allocation): it must train, with the reference's losses;
  fraction     PyTorch alone with torch.cuda.set_per_process_memory_fraction(
               L / the device's memory): expected to run out of memory;
  save_on_cpu  the same fraction, activations saved to pinned host memory by
               torch.autograd.graph.save_on_cpu (PyTorch's own offload).

Each run prints one JSON line {"bench":"gpt2","run":...,"ok":...,"losses":[...],
"step_ms_median":...,"tokens_per_s":...}; the suite adds a summary line per
ratio with "loss_equal_lms_unlimited" (bitwise, the gate), "loss_equal" (with
PyTorch's own allocator) and "throughput_vs_plain". Deterministic
algorithms (torch.use_deterministic_algorithms, TF32 off), so that equal
losses are expected and a difference is a bug.

  python3 bench/gpt2.py run [--save-on-cpu] [--fraction F] ...   one run, for the suite
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time


def model_args(p):
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--steps", type=int, default=20)


def run(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    if hasattr(torch.utils, "deterministic"):  # no NaN fill of every torch.empty: lms would move it
        torch.utils.deterministic.fill_uninitialized_memory = False
    dev = torch.device("cuda")
    if a.fraction > 0:
        torch.cuda.set_per_process_memory_fraction(a.fraction, dev)

    class Block(nn.Module):
        def __init__(self, w, h):
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(w), nn.LayerNorm(w)
            self.qkv, self.proj = nn.Linear(w, 3 * w), nn.Linear(w, w)
            self.fc, self.out = nn.Linear(w, 4 * w), nn.Linear(4 * w, w)

        def forward(self, x):
            b, t, w = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(w, dim=2)
            q, k, v = (z.view(b, t, self.h, w // self.h).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(w // self.h)
            mask = torch.ones(t, t, device=x.device, dtype=torch.bool).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, w))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(a.vocab, a.width)
            self.pos = nn.Embedding(a.seq, a.width)
            self.blocks = nn.ModuleList(Block(a.width, a.heads) for _ in range(a.layers))
            self.ln = nn.LayerNorm(a.width)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.ln(x) @ self.tok.weight.t()  # tied head

    torch.manual_seed(0)
    model = GPT().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(1)
    data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g) for _ in range(4)]
    losses, ms = [], []
    result = {"bench": "gpt2", "run": a.label, "ok": True, "device": torch.cuda.get_device_name(dev),
              "torch": torch.__version__, "params": sum(p.numel() for p in model.parameters())}
    try:
        for step in range(a.steps):
            batch = data[step % len(data)].to(dev)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if a.save_on_cpu:
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    logits = model(batch[:, :-1])
                    loss = F.cross_entropy(logits.reshape(-1, a.vocab), batch[:, 1:].reshape(-1))
            else:
                logits = model(batch[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, a.vocab), batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())  # synchronizes
            ms.append((time.perf_counter() - t0) * 1e3)
            del logits, loss
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one; without PyTorch's cache
        # a failed cudaMalloc is a plain RuntimeError (or AcceleratorError) naming it
        text = str(e)
        if not isinstance(e, torch.cuda.OutOfMemoryError) and "out of memory" not in text:
            raise
        result.update(ok=False, error="out of memory", message=text.splitlines()[0][:300])
    timed = ms[2:] if len(ms) > 2 else ms
    # footprint: PyTorch's peak of allocated tensors; 0 without its caching
    # allocator (PYTORCH_NO_CUDA_MEMORY_CACHING=1 keeps no statistics)
    result.update(losses=losses, steps=len(losses), footprint=torch.cuda.max_memory_allocated(dev),
                  device_memory=torch.cuda.get_device_properties(dev).total_memory)
    if timed:
        med = statistics.median(timed)
        result.update(step_ms_median=round(med, 3), tokens_per_s=round(a.batch * a.seq / med * 1e3, 1))
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 3


def child(a, label, env=None, extra=()):
    cmd = [sys.executable, os.path.abspath(__file__), "run", "--label", label, "--layers", str(a.layers),
           "--width", str(a.width), "--heads", str(a.heads), "--seq", str(a.seq), "--batch", str(a.batch),
           "--vocab", str(a.vocab), "--steps", str(a.steps), *extra]
    full = dict(os.environ, **(env or {}))
    p = subprocess.run(cmd, env=full, capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith('{"bench": "gpt2"')]
    if not lines:
        r = {"bench": "gpt2", "run": label, "ok": False, "error": f"exit {p.returncode}",
             "message": (p.stderr.strip().splitlines() or [""])[-1][:300]}
    else:
        r = json.loads(lines[-1])
    print(json.dumps(r), flush=True)
    return r


def suite(a):
    lib = os.path.abspath(a.lib)
    if not os.path.exists(lib):
        sys.exit(f"bench/gpt2.py: no {lib}: build lms first (make build)")
    lms_env = {"LD_PRELOAD": lib, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    plain = child(a, "plain", {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    if not plain["ok"]:
        sys.exit("bench/gpt2.py: the model does not train without a limit; make it smaller")
    lms_free = child(a, "lms unlimited", lms_env)
    footprint, total = plain["footprint"], plain["device_memory"]
    base = plain.get("tokens_per_s") or float("nan")
    status = 0
    for x in a.ratios:
        limit = int(footprint / x)
        frac = limit / total
        r = child(a, f"lms {x}x", dict(lms_env, LMS_DEVICE_LIMIT=str(limit)))
        fr = child(a, f"fraction {x}x", {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}, ["--fraction", f"{frac:.6f}"])
        sc = child(a, f"save_on_cpu {x}x", {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
                   ["--fraction", f"{frac:.6f}", "--save-on-cpu"])
        equal = r["ok"] and r.get("losses") == plain["losses"]
        summary = {"bench": "gpt2", "case": "summary", "oversub": x, "device_limit": limit,
                   "footprint": footprint, "lms_trains": r["ok"], "loss_equal": equal,
                   "loss_equal_lms_unlimited": r["ok"] and r.get("losses") == lms_free.get("losses"),
                   "final_loss": r.get("losses", [None])[-1] if r.get("losses") else None,
                   "reference_final_loss": plain["losses"][-1],
                   "fraction_oom": not fr["ok"] and fr.get("error") == "out of memory",
                   "save_on_cpu_ok": sc["ok"],
                   "throughput_vs_plain": round(r["tokens_per_s"] / base, 3) if r.get("tokens_per_s") else None,
                   "save_on_cpu_vs_plain": round(sc["tokens_per_s"] / base, 3) if sc["ok"] and sc.get("tokens_per_s") else None}
        print(json.dumps(summary), flush=True)
        # The gate: bitwise the losses of the same allocator with no limit.
        # Equality with PyTorch's own allocator is reported too (loss_equal);
        # it is expected (deterministic algorithms, both 256-byte aligned) but
        # cuBLAS may choose kernels by alignment.
        status |= not (r["ok"] and summary["loss_equal_lms_unlimited"])
    return status


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("suite")
    model_args(s)
    s.add_argument("--ratios", type=lambda t: [float(v) for v in t.split(",")], default=[2.0])
    s.add_argument("--lib", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "liblms.so"))
    r = sub.add_parser("run")
    model_args(r)
    r.add_argument("--label", default="run")
    r.add_argument("--fraction", type=float, default=0)
    r.add_argument("--save-on-cpu", action="store_true")
    a = p.parse_args()
    return suite(a) if a.cmd == "suite" else run(a)


if __name__ == "__main__":
    sys.exit(main())
