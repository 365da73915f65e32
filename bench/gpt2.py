#!/usr/bin/env python3
"""bench/gpt2.py — a GPT-2-style model trained by unmodified PyTorch under lms.

Needs a CUDA GPU, PyTorch and build/liblms.so. Nothing is downloaded: the
weights are random (seeded) and the tokens too. Every run is its own process,
so that the preload, the limit and the allocator are each run's own:

  python3 bench/gpt2.py suite [--steps N] [--ratios 2] [--lib build/liblms.so]
      [--layers 24 --width 1024 --heads 16 --seq 1024 --batch 8 --vocab 50257]
      [--small] [--out DIR] [--diagnose] [--timeout SECONDS]
      [--runs lms,fraction,save_on_cpu,uvm,uvm_prefetch] [--uvm-lib build/bench/libuvm_alloc.so]

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
               torch.autograd.graph.save_on_cpu (PyTorch's own offload);
  uvm          unified memory, the peer a user would pick instead of lms:
               every tensor a cuMemAllocManaged allocation, through PyTorch's
               CUDAPluggableAllocator and bench/uvm_alloc.c (--uvm-lib), with
               all of the device's free memory but L taken away once PyTorch
               is up (Note [A device limit for UVM] there), so that X means
               what it means for lms: F over the device memory the allocator
               has. The driver migrates pages on demand;
  uvm_prefetch the same, each allocation also prefetched to the device on
               its stream (cuMemPrefetchAsync), the one hint an allocator can
               give.
--runs picks which of these run at each ratio (lms,fraction,save_on_cpu by
default; "lms unlimited" runs where lms does).

Each run prints one JSON line {"bench":"gpt2","run":...,"ok":...,"losses":[...],
"step_ms_median":...,"tokens_per_s":...}; the suite adds a summary line per
ratio with "loss_equal_lms_unlimited" (bitwise, the gate), "loss_equal" (with
PyTorch's own allocator) and "throughput_vs_plain" (and the other runs'
"..._vs_plain" and whether they trained). Deterministic
algorithms (torch.use_deterministic_algorithms, TF32 off), so that equal
losses are expected and a difference is a bug.

Before anything runs, the suite checks (in a process of its own, so that this
one holds no CUDA context) that this python3 has torch and a CUDA device, and
prints which python, torch, CUDA and device as a line with "case":
"environment"; without them it says why and exits 77 (skipped), so that a
script can tell a skip from a failure. `python3 bench/gpt2.py check` does that
check alone.

Every run's whole output (stdout and stderr, with a step-by-step progress
line) is written to OUT/<run>.log as it runs (--out, default build/gpt2; the
suite prints where), and a run that fails carries the last 60 lines of it in
its JSON line ("stderr_tail"), its cause ("message": the exception, CUDA
error or signal) and the log's path, so that a CUDA fault is reported with
its cause. --timeout ends a run that takes longer (reported as failed).

  --small     a model for a first smoke run under the preload: 4 layers,
              width 256, 4 heads, batch 8 x 256 tokens, vocabulary 2048,
              4 steps (each still settable); e.g.
              python3 bench/gpt2.py suite --small --ratios 2 --diagnose
              trains it unlimited, then under lms at 2x.
  --diagnose  the children run with CUDA_LAUNCH_BLOCKING=1 (a fault is
              reported at the launch that caused it), and the lms runs with
              LMS_LOG=info, LMS_STATS=1 and LMS_TRACE_ACCESSES=OUT/<run>.trace.
              Step times then mean nothing.

  python3 bench/gpt2.py run [--save-on-cpu] [--fraction F]
      [--allocator torch|uvm|uvm_prefetch --device-limit L] ...   one run, for the suite

trace_model() is the same model for tools/lms-trace-torch.py (bench/calibrate.py
records it to set the simulator's prediction beside what the card did).
"""
import argparse
import ctypes
import json
import math
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
import traceback

SKIP = 77  # the exit status of a run that cannot happen here (CTest's "skipped")
TAIL_LINES = 60  # of a failed run's output, in its JSON line


# The model's shape: GPT-2 medium's by default; --small for a first smoke run
# (seconds a run). An option given on the command line wins over either.
FULL = dict(layers=24, width=1024, heads=16, seq=1024, batch=8, vocab=50257, steps=20)
SMALL = dict(layers=4, width=256, heads=4, seq=256, batch=8, vocab=2048, steps=4)


def model_args(p):
    for name in FULL:
        p.add_argument(f"--{name}", type=int, default=None,
                       help=f"default {FULL[name]}, with --small {SMALL[name]}")
    p.add_argument("--small", action="store_true", help="the small model (a smoke run)")


def resolve_shape(a):
    shape = SMALL if a.small else FULL
    for name, value in shape.items():
        if getattr(a, name) is None:
            setattr(a, name, value)


def gpt_model(torch, shape):
    """The model every run trains, from torch.nn: GPT-2's decoder, its head
    tied to the token embedding. shape has the FULL keys as attributes."""
    nn, F = torch.nn, torch.nn.functional

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
            self.tok = nn.Embedding(shape.vocab, shape.width)
            self.pos = nn.Embedding(shape.seq, shape.width)
            self.blocks = nn.ModuleList(Block(shape.width, shape.heads) for _ in range(shape.layers))
            self.ln = nn.LayerNorm(shape.width)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.ln(x) @ self.tok.weight.t()  # tied head

    return GPT()


def make_optimizer(torch, params):
    return torch.optim.Adam(params, lr=3e-4)


def loss_of(torch, logits, target, vocab):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1))


def trace_model(batch=None, seq=None):
    """This file's model and step for tools/lms-trace-torch.py (MODEL
    gpt2:trace_model, run from bench/), so that bench/calibrate.py simulates
    what the card trained: the shape from LMS_GPT2_SHAPE (JSON with FULL's
    keys, as calibrate.py writes it; GPT-2 medium's without it), batch and
    seq from the recorder's --batch and --seq."""
    import torch
    shape = dict(FULL, **json.loads(os.environ.get("LMS_GPT2_SHAPE", "{}")))
    shape.update({k: v for k, v in (("batch", batch), ("seq", seq)) if v is not None})
    a = argparse.Namespace(**shape)
    torch.manual_seed(0)
    model = gpt_model(torch, a)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=torch.Generator().manual_seed(1))
    return (model, ((idx[:, :-1],), idx[:, 1:]), lambda logits, y: loss_of(torch, logits, y, a.vocab),
            lambda params: make_optimizer(torch, params))


# bench/uvm_alloc.c's allocation entry point for each --allocator but torch's
UVM_ENTRY = {"uvm": "uvm_malloc", "uvm_prefetch": "uvm_malloc_prefetch"}


def use_uvm(a):
    """PyTorch allocates through libuvm_alloc.so (bench/uvm_alloc.c) from here
    on. Called before check(), which sets CUDA up: PyTorch changes its
    allocator only before that."""
    import torch
    if not torch.cuda.is_available():
        return  # check() says why
    lib = os.path.abspath(a.uvm_lib)
    if not os.path.exists(lib):
        sys.exit(f"bench/gpt2.py: no {lib}: build it (cmake --build build --target uvm_alloc, "
                 "where the CUDA toolkit is)")
    torch.cuda.memory.change_current_allocator(
        torch.cuda.memory.CUDAPluggableAllocator(lib, UVM_ENTRY[a.allocator], "uvm_free"))


def uvm_limit(torch, a, dev):
    """Leaves unified memory a.device_limit bytes of the device (Note [A
    device limit for UVM] in bench/uvm_alloc.c): once cuBLAS is up, reserves
    the rest of what is free. Returns (bytes reserved, bytes free after)."""
    x = torch.ones(64, 64, device=dev)
    (x @ x).sum().item()  # cuBLAS's handle and workspace, before the count
    del x
    free = torch.cuda.mem_get_info(dev)[0]
    reserve = free - a.device_limit
    if reserve > 0:
        lib = ctypes.CDLL(os.path.abspath(a.uvm_lib))
        lib.uvm_reserve.restype = ctypes.c_void_p
        lib.uvm_reserve.argtypes = (ctypes.c_size_t, ctypes.c_int)
        lib.uvm_reserve(reserve, torch.cuda.current_device())  # aborts, saying why, if it fails
    return max(reserve, 0), torch.cuda.mem_get_info(dev)[0]


def run(a):
    if a.allocator != "torch":
        use_uvm(a)
    if check() != 0:
        return SKIP
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    if hasattr(torch.utils, "deterministic"):  # no NaN fill of every torch.empty: lms would move it
        torch.utils.deterministic.fill_uninitialized_memory = False
    dev = torch.device("cuda")
    if a.fraction > 0:
        # an index: torch 2.11 refuses a torch.device("cuda") without one
        torch.cuda.set_per_process_memory_fraction(a.fraction, torch.cuda.current_device())
    limits = {}
    if a.allocator != "torch" and a.device_limit > 0:
        reserved, free = uvm_limit(torch, a, dev)
        limits = {"device_limit": a.device_limit, "uvm_reserved": reserved, "device_free_at_start": free}

    torch.manual_seed(0)
    model = gpt_model(torch, a).to(dev)
    opt = make_optimizer(torch, model.parameters())
    g = torch.Generator().manual_seed(1)
    data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g) for _ in range(4)]
    losses, ms = [], []
    result = {"bench": "gpt2", "run": a.label, "ok": True, "device": torch.cuda.get_device_name(dev),
              "torch": torch.__version__, "allocator": a.allocator,
              "params": sum(p.numel() for p in model.parameters()), **limits}
    try:
        for step in range(a.steps):
            batch = data[step % len(data)].to(dev)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if a.save_on_cpu:
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    logits = model(batch[:, :-1])
                    loss = loss_of(torch, logits, batch[:, 1:], a.vocab)
            else:
                logits = model(batch[:, :-1])
                loss = loss_of(torch, logits, batch[:, 1:], a.vocab)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())  # synchronizes
            ms.append((time.perf_counter() - t0) * 1e3)
            print(f"gpt2: {a.label}: step {step + 1}/{a.steps} loss {losses[-1]:.6f} "
                  f"{ms[-1]:.1f} ms", file=sys.stderr, flush=True)
            del logits, loss
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one; without PyTorch's cache
        # a failed cudaMalloc is a plain RuntimeError (or AcceleratorError) naming it
        text = str(e)
        if not isinstance(e, torch.cuda.OutOfMemoryError) and "out of memory" not in text:
            raise
        traceback.print_exc(file=sys.stderr)  # where in the step: the log keeps it
        result.update(ok=False, error="out of memory", message=text.splitlines()[0][:300])
    timed = ms[2:] if len(ms) > 2 else ms
    # footprint: PyTorch's peak of allocated tensors; 0 without its caching
    # allocator (PYTORCH_NO_CUDA_MEMORY_CACHING=1 keeps no statistics), and
    # none under a pluggable one (which refuses to be asked)
    footprint = torch.cuda.max_memory_allocated(dev) if a.allocator == "torch" else None
    result.update(losses=losses, steps=len(losses), footprint=footprint,
                  device_memory=torch.cuda.get_device_properties(dev).total_memory)
    if timed:
        med = statistics.median(timed)
        result.update(step_ms_median=round(med, 3), tokens_per_s=round(a.batch * a.seq / med * 1e3, 1))
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 3


def environment():
    """What this python3 is and what of torch and CUDA it has: a dict with
    "skipped" set to the reason when a run cannot happen here."""
    env = {"bench": "gpt2", "case": "environment", "python": sys.executable,
           "python_version": sys.version.split()[0]}
    try:
        import torch
    except Exception as e:  # ImportError, or a torch that fails to load
        env["skipped"] = f"{sys.executable} has no usable torch ({type(e).__name__}: {e})"
        return env
    env.update(torch=torch.__version__, torch_file=os.path.dirname(torch.__file__),
               torch_cuda=torch.version.cuda)
    if not torch.version.cuda:
        env["skipped"] = f"torch {torch.__version__} is built without CUDA"
    elif not torch.cuda.is_available():
        env["skipped"] = (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device"
                          f" (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')})")
    else:
        props = torch.cuda.get_device_properties(0)
        env.update(device=props.name, device_memory=props.total_memory,
                   capability=f"{props.major}.{props.minor}", devices=torch.cuda.device_count(),
                   cudnn=torch.backends.cudnn.version())
    return env


def check():
    """Prints the environment line and returns 0, or 77 and why not. The
    suite's first step, in a process of its own (no CUDA context is left in
    the suite's), and each run's."""
    env = environment()
    print(json.dumps(env), flush=True)
    if "skipped" in env:
        print(f"bench/gpt2.py: skipped: {env['skipped']}", file=sys.stderr, flush=True)
        return SKIP
    print(f"bench/gpt2.py: {env['python']} (Python {env['python_version']}), torch {env['torch']} "
          f"(CUDA {env['torch_cuda']}), {env['device']} ({env['device_memory'] / 2**30:.1f} GiB)",
          file=sys.stderr, flush=True)
    return 0


def log_name(label):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label)


# The line that says why a run failed: the exception, a CUDA error, lms's own
# error or bench/uvm_alloc's, or the fault, in preference to the last line
# (which under LMS_STATS=1 is lms's statistics).
CAUSE = re.compile(r"CUDA error|Error\b.*:|Exception\b.*:|^lms: error:|^bench/uvm_alloc: error:|"
                   r"illegal|Segmentation|Aborted|core dumped|Killed")


def cause_of(tail):
    for line in reversed(tail):
        if CAUSE.search(line):
            return line.strip()[:300]
    return next((line.strip()[:300] for line in reversed(tail) if line.strip()), "")


def child(a, label, env=None, extra=()):
    """Runs one training run in a process of its own, its whole output into
    OUT/<label>.log as it goes; returns (and prints) its JSON line, with the
    last lines of its output and the cause when it failed."""
    cmd = [sys.executable, os.path.abspath(__file__), "run", "--label", label, "--layers", str(a.layers),
           "--width", str(a.width), "--heads", str(a.heads), "--seq", str(a.seq), "--batch", str(a.batch),
           "--vocab", str(a.vocab), "--steps", str(a.steps), *extra]
    env = dict(env or {}, PYTHONUNBUFFERED="1")
    name = log_name(label)
    if a.diagnose:
        env["CUDA_LAUNCH_BLOCKING"] = "1"
        if "LD_PRELOAD" in env:
            env.update(LMS_LOG="info", LMS_STATS="1",
                       LMS_TRACE_ACCESSES=os.path.join(a.out, name + ".trace"))
    log = os.path.join(a.out, name + ".log")
    header = "# " + shlex.join([f"{k}={v}" for k, v in sorted(env.items())] + cmd) + "\n"
    timed_out = False
    t0 = time.monotonic()
    with open(log, "w") as f:
        f.write(header)
        f.flush()
        p = subprocess.Popen(cmd, env=dict(os.environ, **env), stdout=f, stderr=subprocess.STDOUT)
        try:
            rc = p.wait(timeout=a.timeout or None)
        except subprocess.TimeoutExpired:
            timed_out = True
            p.kill()
            rc = p.wait()
    seconds = round(time.monotonic() - t0, 1)
    with open(log, errors="replace") as f:
        lines = f.read().splitlines()[1:]
    results = [l for l in lines if l.startswith('{"bench": "gpt2", "run"')]
    tail = [l for l in lines if not l.startswith('{"bench": "gpt2"')][-TAIL_LINES:]
    if results:
        r = json.loads(results[-1])
    else:
        if timed_out:
            error = f"timeout after {a.timeout:g} s"
        elif rc < 0:
            error = f"killed by {signal.Signals(-rc).name}" if -rc in signal.valid_signals() else f"signal {-rc}"
        else:
            error = f"exit {rc}"
        r = {"bench": "gpt2", "run": label, "ok": False, "error": error, "message": cause_of(tail)}
    r["seconds"] = seconds
    if not r["ok"]:
        r["log"] = log
        # the tail, except for the out-of-memory that PyTorch's own runs
        # under a fraction are expected to end with (its message is there)
        if "LD_PRELOAD" in env or r.get("error") != "out of memory":
            r["stderr_tail"] = tail
    emit(a, r)
    return r


def emit(a, line):
    """A JSON line on stdout and in OUT/results.jsonl."""
    text = json.dumps(line)
    print(text, flush=True)
    with open(os.path.join(a.out, "results.jsonl"), "a") as f:
        f.write(text + "\n")


def suite(a):
    # The environment first, in a child: a skip (77) must come before
    # anything else can fail.
    pre = subprocess.run([sys.executable, os.path.abspath(__file__), "check"], capture_output=True, text=True)
    if pre.returncode != 0:
        sys.stdout.write(pre.stdout)
        sys.stdout.flush()
        sys.stderr.write(pre.stderr)
        return pre.returncode if pre.returncode == SKIP else 1
    sys.stderr.write(pre.stderr)
    lib = os.path.abspath(a.lib)
    if "lms" in a.runs and not os.path.exists(lib):
        sys.exit(f"bench/gpt2.py: no {lib}: build lms first (make build)")
    if {"uvm", "uvm_prefetch"} & set(a.runs) and not os.path.exists(a.uvm_lib):
        sys.exit(f"bench/gpt2.py: no {os.path.abspath(a.uvm_lib)}: build it (cmake --build build "
                 "--target uvm_alloc, where the CUDA toolkit is)")
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    open(os.path.join(a.out, "results.jsonl"), "w").close()
    env = json.loads(pre.stdout.strip().splitlines()[-1])
    env.update(lib=lib, out=a.out, diagnose=a.diagnose, runs=a.runs,
               shape={k: getattr(a, k) for k in FULL})
    emit(a, env)
    print(f"bench/gpt2.py: each run's log in {a.out}", file=sys.stderr, flush=True)
    lms_env = {"LD_PRELOAD": lib, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    torch_env = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    plain = child(a, "plain", torch_env)
    if not plain["ok"]:
        sys.exit("bench/gpt2.py: the model does not train without a limit; make it smaller")
    lms_free = child(a, "lms unlimited", lms_env) if "lms" in a.runs else {}
    footprint, total = plain["footprint"], plain["device_memory"]
    base = plain.get("tokens_per_s") or float("nan")

    def vs_plain(r):
        return round(r["tokens_per_s"] / base, 3) if r.get("ok") and r.get("tokens_per_s") else None

    status = 0
    for x in a.ratios:
        limit = int(footprint / x)
        frac = limit / total
        summary = {"bench": "gpt2", "case": "summary", "oversub": x, "device_limit": limit,
                   "footprint": footprint, "reference_final_loss": plain["losses"][-1]}
        if "lms" in a.runs:
            r = child(a, f"lms {x}x", dict(lms_env, LMS_DEVICE_LIMIT=str(limit)))
            equal = r["ok"] and r.get("losses") == plain["losses"]
            summary.update(lms_trains=r["ok"], loss_equal=equal,
                           loss_equal_lms_unlimited=r["ok"] and r.get("losses") == lms_free.get("losses"),
                           final_loss=r.get("losses", [None])[-1] if r.get("losses") else None,
                           throughput_vs_plain=vs_plain(r))
            # The gate: bitwise the losses of the same allocator with no
            # limit. Equality with PyTorch's own allocator is reported too
            # (loss_equal); it is expected (deterministic algorithms, both
            # 256-byte aligned) but cuBLAS may choose kernels by alignment.
            status |= not (r["ok"] and summary["loss_equal_lms_unlimited"])
        if "fraction" in a.runs:
            fr = child(a, f"fraction {x}x", torch_env, ["--fraction", f"{frac:.6f}"])
            summary.update(fraction_oom=not fr["ok"] and fr.get("error") == "out of memory")
        if "save_on_cpu" in a.runs:
            sc = child(a, f"save_on_cpu {x}x", torch_env, ["--fraction", f"{frac:.6f}", "--save-on-cpu"])
            summary.update(save_on_cpu_ok=sc["ok"], save_on_cpu_vs_plain=vs_plain(sc))
        # Unified memory with the device's memory beyond the limit taken
        # away (Note [A device limit for UVM]); not a gate: the peer's rows
        for kind in ("uvm", "uvm_prefetch"):
            if kind in a.runs:
                u = child(a, f"{kind} {x}x", torch_env,
                          ["--allocator", kind, "--uvm-lib", os.path.abspath(a.uvm_lib),
                           "--device-limit", str(limit)])
                summary.update({f"{kind}_trains": u["ok"], f"{kind}_vs_plain": vs_plain(u),
                                f"{kind}_loss_equal": u["ok"] and u.get("losses") == plain["losses"]})
        emit(a, summary)
    return status


RUNS = ("lms", "fraction", "save_on_cpu", "uvm", "uvm_prefetch")


def run_list(text):
    runs = text.split(",")
    bad = [r for r in runs if r not in RUNS]
    if bad:
        raise argparse.ArgumentTypeError(f"{','.join(bad)}: not one of {','.join(RUNS)}")
    return runs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    s = sub.add_parser("suite")
    model_args(s)
    s.add_argument("--ratios", type=lambda t: [float(v) for v in t.split(",")], default=[2.0])
    s.add_argument("--lib", default=os.path.join(here, "..", "build", "liblms.so"))
    s.add_argument("--out", default=os.path.join(here, "..", "build", "gpt2"),
                   help="folder for each run's log (and traces with --diagnose)")
    s.add_argument("--diagnose", action="store_true",
                   help="CUDA_LAUNCH_BLOCKING=1; lms runs with LMS_LOG=info, LMS_STATS=1, LMS_TRACE_ACCESSES")
    s.add_argument("--timeout", type=float, default=0, help="seconds a run may take; 0: no limit")
    s.add_argument("--runs", type=run_list, default=["lms", "fraction", "save_on_cpu"],
                   help=f"each ratio's runs, of {','.join(RUNS)} (lms,fraction,save_on_cpu)")
    uvm_lib = os.path.join(here, "..", "build", "bench", "libuvm_alloc.so")
    s.add_argument("--uvm-lib", default=uvm_lib, help="bench/uvm_alloc.c built, for the uvm runs")
    r = sub.add_parser("run")
    model_args(r)
    r.add_argument("--label", default="run")
    r.add_argument("--fraction", type=float, default=0)
    r.add_argument("--save-on-cpu", action="store_true")
    r.add_argument("--allocator", choices=("torch", *UVM_ENTRY), default="torch")
    r.add_argument("--uvm-lib", default=uvm_lib)
    r.add_argument("--device-limit", type=int, default=0,
                   help="uvm: the device's bytes left to unified memory; 0: all")
    sub.add_parser("check", help="whether this python3 has torch and a CUDA device (exit 0, else 77)")
    a = p.parse_args()
    if a.cmd == "check":
        return check()
    resolve_shape(a)
    return suite(a) if a.cmd == "suite" else run(a)


if __name__ == "__main__":
    sys.exit(main())
