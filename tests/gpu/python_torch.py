"""tests/gpu/python_torch.py [--expect-swap] [--layers N] [--width W] [--steps S]

lms.torch.use() on a card (tools/gpu-session.sh's python_torch step): lms
becomes PyTorch's allocator before any CUDA tensor, an MLP trains a few
steps with SGD whose steps lms.torch.mark_iterations marks, and the run
passes when every loss is finite and lms.stats() shows the model's memory
allocated through lms (with --expect-swap, run under the preload with a
device limit below the footprint, some of it evicted too). Prints each
step's loss and one JSON line of the outcome. Exit status 77 (skipped) where
there is no torch with CUDA.
"""
import argparse
import json
import math
import sys
import time
import warnings

import lms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--expect-swap", action="store_true")
    args = ap.parse_args()

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            lms.torch.use()
        except (ImportError, RuntimeError) as e:
            print("skipped: %s" % e)
            return 77
    for w in said:
        print("warning: %s" % w.message)
    import torch

    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    lms.torch.mark_iterations(opt)
    x = torch.randn(args.batch, args.width, device="cuda")
    y = torch.randn(args.batch, args.width, device="cuda")
    losses = []
    for step in range(args.steps):
        t0 = time.time()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # waits for the step
        print("step %d/%d loss %.6f %.1f ms" % (step + 1, args.steps, losses[-1],
                                                (time.time() - t0) * 1e3), flush=True)
    torch.cuda.synchronize()
    s = lms.stats()
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    failures = []
    if not all(math.isfinite(v) for v in losses):
        failures.append("a loss is not finite")
    if s["allocated_bytes"] < 2 * params:  # the parameters and their momentum at least
        failures.append("lms allocated %d bytes, less than the %d the parameters and momentum "
                        "take: PyTorch's memory is not lms's" % (s["allocated_bytes"], 2 * params))
    if args.expect_swap and s["evictions"] == 0:
        failures.append("nothing was evicted, though the device limit is below the footprint")
    print(json.dumps({"test": "python_torch", "library": lms.library_path(),
                      "preloaded": lms.is_preloaded(), "torch": torch.__version__,
                      "parameter_bytes": params, "losses": losses, "stats": s,
                      "failures": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
