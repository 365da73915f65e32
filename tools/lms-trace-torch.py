#!/usr/bin/env python3
"""tools/lms-trace-torch.py -- records a PyTorch training step as an lms trace.

    tools/lms-trace-torch.py MODEL [--batch N] [--seq N] [--steps N] [--gpu NAME]
        [--dtype float32|bfloat16|float16] [--device meta|cpu] [--small] [-o FILE(.gz)]

MODEL is resnet18, mobilenet_v3_large, efficientnet_b0 (torchvision), bert (a
BERT-base-like encoder), gpt2 (a GPT-2 124M-like decoder) or gpt2_ckpt (the same
with torch.utils.checkpoint on every block); or module:function, a function of
the user's called as function(batch=N or None, seq=N or None) that returns
(model, batch, loss_fn) or (model, batch, loss_fn, make_optimizer): batch is
(inputs, target), the step computes loss_fn(model(*inputs), target) (inputs a
tensor or a tuple of them), and make_optimizer(parameters) gives the optimizer
(AdamW by default). The trace (docs/trace-format.md, version 1) goes to -o, or
stdout; a name ending in .gz is gzipped. `build/bench/simulate --trace FILE
--oversub 2` then says how the step runs with half its memory on the device.

How it records (Note [Recording a step]):
- The model runs on the `meta` device (--device meta, the default): tensors
  have shapes and no data, so a full-size model needs no memory and no GPU.
  --device cpu runs it for real (small models: the checks, tests/tools/).
- A TorchDispatchMode sees every aten op below autograd. Each op's tensors
  are named by their storage (views share one), through StorageWeakRef
  (torch.multiprocessing.reductions, in torch 1.13 and 2.x): a storage is
  allocated when an op first produces it, and freed at the first op after
  its last reference died (the weak reference expired), whatever held it:
  a Python name, autograd's saved tensors, the optimizer.
- Modes from the op's schema: an argument it writes (Tensor(a!)) is `w`, or
  `o` when the op overwrites all of it (fill_, zero_, copy_, the random
  fills, out=) and the tensor covers its whole storage; a fresh output is
  `o`; the rest `r`. Ops that only make views, and empty*, run no kernel.
- Kernel times: a roofline of the chosen GPU (GPUS below): FLOPs counted for
  mm, addmm, bmm, baddbmm, convolution (forward and backward) and attention
  (scaled_dot_product_*), each at the dtype's dense peak; every op takes at
  least its bytes read and written over the HBM bandwidth, plus LAUNCH_NS.
- The first step also allocates the parameters and buffers (one copy kernel
  each, as model.to(device) does) and the optimizer's state. Each step
  uploads its batch (alloc and a copy kernel), runs forward, loss, backward,
  optimizer.step() and zero_grad(set_to_none=True), and ends with
  `iteration`. The cycle collector is off while recording (collected at each
  step's end), so frees come when reference counts say.
- vDNN hints: a leaf module's call starts a layer (numbered in forward
  order, each step anew); a tensor allocated in forward and saved for
  backward (saved_tensors_hooks) is `act <layer>`; in backward, unpacking a
  layer's saved tensor makes it the current layer; an optimizer kernel
  belongs to the layer whose parameter it updates.

What it cannot see (docs/trace-format.md, "Traces the recorder writes"):
memory a kernel allocates for itself (cuBLAS/cuDNN workspaces, a CPU kernel's
temporaries), the caching allocator's rounding and reuse, tensors of no
dimensions (the loss, step counts: a few bytes each, some on the host), and
CUDA-only kernels (fused or foreach optimizers, flash attention on a card
where the meta device picks another): the step is recorded as PyTorch runs
it on the device given. Bad arguments: a message on stderr, exit status 2.
"""
import argparse
import contextlib
import gc
import gzip
import heapq
import importlib
import math
import os
import sys

# Peak dense throughput (no structured sparsity), TFLOP/s, and HBM bandwidth,
# GB/s, from the vendors' datasheets:
# - H100 SXM5 and H100 PCIe: NVIDIA H100 Tensor Core GPU datasheet (2023):
#   FP32 67 / 51; TF32 tensor 989 / 756 and BF16/FP16 tensor 1979 / 1513,
#   both "with sparsity", so half of that dense; 3.35 TB/s HBM3 / 2 TB/s HBM2e.
# - H200 SXM: NVIDIA H200 Tensor Core GPU datasheet (2024): the H100 SXM's
#   compute, 4.8 TB/s HBM3e.
# - A100 80GB SXM: NVIDIA A100 Tensor Core GPU datasheet (2021): FP32 19.5,
#   TF32 156, BF16/FP16 312 (dense), 2039 GB/s HBM2e.
# float32 matmuls run at the FP32 peak (PyTorch does not use TF32 for them by
# default: torch.backends.cuda.matmul.allow_tf32 is False), float32
# convolutions at the TF32 peak (torch.backends.cudnn.allow_tf32 is True).
GPUS = {
    "h100-pcie": {"fp32": 51.0, "tf32": 378.0, "half": 756.5, "gbps": 2000.0},
    "h100-sxm": {"fp32": 67.0, "tf32": 494.5, "half": 989.5, "gbps": 3350.0},
    "h200": {"fp32": 67.0, "tf32": 494.5, "half": 989.5, "gbps": 4800.0},
    "a100": {"fp32": 19.5, "tf32": 156.0, "half": 312.0, "gbps": 2039.0},
}
LAUNCH_NS = 2000  # each kernel's fixed cost: a launch and a GPU's smallest kernel, about 2 us
MODELS = ("resnet18", "mobilenet_v3_large", "efficientnet_b0", "bert", "gpt2", "gpt2_ckpt")
# ops that overwrite every element of the tensor they write
OVERWRITE_OPS = {"fill_", "zero_", "copy_", "normal_", "uniform_", "random_", "bernoulli_",
                 "exponential_", "geometric_", "log_normal_", "cauchy_"}
# ops that allocate without touching the data, and *_like ops that read only a shape
ALLOC_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


def die(msg):
    print("lms-trace-torch: " + msg, file=sys.stderr)
    sys.exit(2)


def op_name(func):
    return func._schema.name.split("::")[-1]


def numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def flops_of(name, args, out):
    """The op's floating-point operations, for the ops the roofline counts; 0 for the rest."""
    if name in ("mm", "addmm", "bmm", "baddbmm"):
        a, b = (args[0], args[1]) if name in ("mm", "bmm") else (args[1], args[2])
        return 2 * numel(a.shape) * b.shape[-1]
    if name == "convolution":
        inp, weight, transposed = args[0], args[1], args[6]
        return 2 * numel((inp if transposed else out).shape) * numel(weight.shape[1:])
    if name == "convolution_backward":
        grad_out, inp, weight, transposed, mask = args[0], args[1], args[2], args[7], args[10]
        fwd = 2 * numel((inp if transposed else grad_out).shape) * numel(weight.shape[1:])
        return fwd * (int(bool(mask[0])) + int(bool(mask[1])))
    if "scaled_dot_product" in name and "attention" in name:
        backward = "backward" in name
        q, k = (args[1], args[2]) if backward else (args[0], args[1])
        fwd = 4 * numel(q.shape) * k.shape[-2]  # Q K^T and P V: 2 * 2 * B H Sq Sk D
        # backward: dV, dP, dQ, dK and the recomputed Q K^T
        return fwd * (2.5 if backward else 1.0)
    return 0


class Storage:
    """A live storage: its id in the trace, the weak reference that says when it dies, its
    size, its layer (where it was made, or the parameter's), the step and line of its alloc."""
    __slots__ = ("id", "ref", "nbytes", "layer", "step", "alloc", "param")

    def __init__(self, ident, ref, nbytes, layer, step, alloc):
        self.id, self.ref, self.nbytes = ident, ref, nbytes
        self.layer, self.step, self.alloc = layer, step, alloc
        self.param = False


def make_recorder(torch, device, gpu):
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode

    half = {torch.float16, torch.bfloat16}

    def storage_of(t):
        if hasattr(t, "untyped_storage"):  # torch 2.x
            return t.untyped_storage()
        return t.storage().untyped()  # 1.13

    class Recorder(TorchDispatchMode):
        """Note [Recording a step]: the trace of the ops run under it."""

        def __init__(self):
            super().__init__()
            self.dev = device
            self.live = {}  # StorageWeakRef.cdata -> Storage
            self.host = {}  # StorageWeakRef.cdata -> StorageWeakRef: on the device, kept on the host
            self.free_ids = []  # ids freed, reused smallest first
            self.next_id = 0
            self.lines = []  # ["alloc", id, bytes, act], ["free", id], ["kernel", ns, layer, phase, acc]
            self.phase, self.layer, self.step = None, 0, 0
            self.paused = False
            self.module_layer = {}
            self.hooked = set()  # the modules with the layer hook
            self.live_bytes = self.peak_bytes = 0

        # ---- storages ------------------------------------------------------------
        # Note [Host tensors]
        # A real run keeps some tensors on the host: a factory called without a device makes
        # a CPU tensor, and so does an op whose operands are all host tensors. On meta they
        # are CPU tensors and left out; on cpu (the checks) they would look like the
        # device's. An op's outputs are marked host when its operands are; a factory's are
        # when it names no device, but the dispatcher fills in cpu for one called without,
        # so on cpu the two cases that do occur are handled apart: tensors of no dimension
        # (the optimizer's step count, torch.tensor(0.); also the loss) are left out
        # altogether, a few bytes each; and the profiler's annotation the optimizer's step
        # wraps itself in, whose torch 1.13 handle is torch.zeros(1), is a null context
        # while recording (no_profiler_marks).
        def tracked(self, t):
            return (isinstance(t, torch.Tensor) and t.device.type == self.dev and t.dim() > 0)

        def lookup(self, t):
            """t's storage record, allocated now if first seen; None when it has no bytes."""
            st = storage_of(t)
            nbytes = st.nbytes()
            if nbytes == 0:
                return None
            ref = StorageWeakRef(st)
            rec = self.live.get(ref.cdata)
            if rec is not None and rec.nbytes != nbytes:  # resized in place: a new allocation
                self.release(ref.cdata, rec)
                rec = None
            if rec is None:
                ident = heapq.heappop(self.free_ids) if self.free_ids else self.next_id
                self.next_id += ident == self.next_id
                rec = Storage(ident, ref, nbytes, self.layer, self.step, len(self.lines))
                self.live[ref.cdata] = rec
                self.lines.append(["alloc", ident, nbytes, None])
                self.live_bytes += nbytes
                self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            return rec

        def is_host(self, t):
            """Whether t is a host tensor: on another device, or made by a factory without one
            (Note [Host tensors])."""
            if t.device.type != self.dev:
                return True
            st = storage_of(t)
            return st.nbytes() != 0 and StorageWeakRef(st).cdata in self.host

        def mark_host(self, t):
            st = storage_of(t)
            if st.nbytes() != 0:
                ref = StorageWeakRef(st)
                if ref.cdata not in self.live:
                    self.host[ref.cdata] = ref

        def release(self, key, rec):
            del self.live[key]
            self.lines.append(["free", rec.id])
            heapq.heappush(self.free_ids, rec.id)
            self.live_bytes -= rec.nbytes

        def sweep(self):
            """Frees the storages whose last reference died."""
            dead = [(k, r) for k, r in self.live.items() if r.ref.expired()]
            for k, r in sorted(dead, key=lambda kr: kr[1].alloc):
                self.release(k, r)
            for k in [k for k, ref in self.host.items() if ref.expired()]:
                del self.host[k]

        # ---- ops -----------------------------------------------------------------
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            self.sweep()
            try:
                out = func(*args, **kwargs)
            except NotImplementedError:
                out = meta_fallback(torch, func, args, kwargs)
                if out is None:
                    raise
            if isinstance(out, (int, float)) and str(func._schema.returns[0].type) == "Tensor":
                # torch 1.13 hands a Python number for a tensor that wraps one (a scalar
                # operand autograd saved); C++ wants the tensor back
                out = torch.tensor(out, dtype=args[0].dtype)
            if not self.paused:
                self.record(func, args, kwargs, out)
            return out

        def record(self, func, args, kwargs, out):
            name = op_name(func)
            schema = func._schema
            acc = {}  # Storage -> mode
            srcs = []  # the input storages, read or not
            nbytes = 0
            seen = set()
            writes = False
            n_any = n_big = n_host = 0  # tensor inputs: all, of a dimension or more, host ones
            for i, arg in enumerate(schema.arguments):
                v = args[i] if i < len(args) else kwargs.get(arg.name)
                write = arg.alias_info is not None and arg.alias_info.is_write
                for t in v if isinstance(v, (list, tuple)) else (v,):
                    if not isinstance(t, torch.Tensor) or id(t) in seen:
                        continue
                    seen.add(id(t))
                    nbytes += t.numel() * t.element_size()
                    writes |= write
                    n_any += 1
                    if t.dim() > 0:
                        n_big += 1
                        if self.is_host(t):
                            n_host += 1
                            continue
                    rec = self.lookup(t) if self.tracked(t) else None
                    if rec is None:
                        continue
                    srcs.append(rec)
                    if name.endswith("_like") and not write:
                        continue
                    mode = "r"
                    if write:
                        whole = (t.is_contiguous() and t.storage_offset() == 0 and
                                 t.numel() * t.element_size() == rec.nbytes)
                        over = name in OVERWRITE_OPS or arg.name == "out"
                        mode = "o" if whole and over else "w"
                    acc[rec] = mode if acc.get(rec, mode) == mode else "w"
            outs = out if isinstance(out, (list, tuple)) else (out,)
            host_out = ((n_any == 0 and kwargs.get("device") is None) or
                        (n_big > 0 and n_host == n_big))
            fresh = False
            for r, t in zip(schema.returns, outs):
                for t in t if isinstance(t, (list, tuple)) else (t,):
                    if not isinstance(t, torch.Tensor) or id(t) in seen:
                        continue
                    seen.add(id(t))
                    if r.alias_info is not None:  # a view of an input, or an input written
                        continue
                    nbytes += t.numel() * t.element_size()
                    fresh = True
                    if not self.tracked(t):
                        continue
                    if host_out:
                        self.mark_host(t)
                        continue
                    known = len(self.live)
                    rec = self.lookup(t)
                    if rec is not None and len(self.live) > known:
                        acc[rec] = "o"
            if name in ALLOC_OPS or not (fresh or writes) or not acc:
                return  # a view, an allocation, or work on the host only
            layer = self.layer
            if self.phase == "opt":  # the layer of the parameter (or state) it updates
                layer = next((r.layer for r in srcs if r.layer is not None), layer)
                for r, m in acc.items():
                    if r not in srcs:
                        r.layer = layer
            flops = flops_of(name, args, out if not isinstance(out, (list, tuple)) else outs[0])
            self.lines.append(["kernel", self.kernel_ns(flops, nbytes, name, args, outs),
                               layer, self.phase, [(r.id, m) for r, m in acc.items()], name])

        def kernel_ns(self, flops, nbytes, name, args, outs):
            g = GPUS[gpu]
            dtype = next((t.dtype for t in outs if isinstance(t, torch.Tensor)), None)
            if dtype in half:
                peak = g["half"]
            else:
                peak = g["tf32"] if name.startswith("convolution") else g["fp32"]
            compute = flops / (peak * 1e3)  # TFLOP/s to FLOP/ns
            memory = nbytes / g["gbps"]  # GB/s is bytes/ns
            return LAUNCH_NS + int(math.ceil(max(compute, memory)))

        # ---- the driver's marks ----------------------------------------------------
        def upload(self, tensors, params=False):
            """Tensors already on the device, as if copied there now: each an alloc and a copy."""
            for t in tensors:
                if self.tracked(t):
                    known = len(self.live)
                    rec = self.lookup(t)
                    if rec is not None and len(self.live) > known:
                        rec.param = params
                        ns = LAUNCH_NS + int(math.ceil(rec.nbytes / GPUS[gpu]["gbps"]))
                        self.lines.append(["kernel", ns, None, None, [(rec.id, "o")], "upload"])

        @contextlib.contextmanager
        def paused_copy(self):
            """Ops not recorded: the batch's copy, uploaded after."""
            self.paused = True
            try:
                yield
            finally:
                self.paused = False

        def end_step(self):
            gc.collect()
            self.sweep()
            self.lines.append(["iteration"])
            self.step += 1

        def hooks(self, model):
            """The module hooks and saved-tensor hooks of the layer hints."""

            def pre_hook(module, inputs):
                if self.phase == "fwd":
                    self.layer += 1
                    self.module_layer[module] = self.layer
                else:  # recomputed in backward (checkpointing)
                    self.layer = self.module_layer.get(module, self.layer)

            for m in model.modules():
                if next(m.children(), None) is None and m not in self.hooked:
                    self.hooked.add(m)
                    m.register_forward_pre_hook(pre_hook)
            return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

        def pack(self, t):
            if not isinstance(t, torch.Tensor):  # torch 1.13: a scalar operand, unwrapped
                return (torch.tensor(t), self.layer)
            if self.phase == "fwd" and self.tracked(t):
                st = storage_of(t)
                rec = self.live.get(StorageWeakRef(st).cdata) if st.nbytes() else None
                if (rec is not None and not rec.param and rec.step == self.step and
                        self.lines[rec.alloc][3] is None):
                    self.lines[rec.alloc][3] = self.layer
            return (t, self.layer)

        def unpack(self, packed):
            t, layer = packed
            if self.phase == "bwd":
                self.layer = layer
            return t

        def set_param_layers(self, model):
            """Parameters and buffers belong to the layer of their module's first call."""
            for m in model.modules():
                layer = self.module_layer.get(m)
                for p in list(m.parameters(recurse=False)) + list(m.buffers(recurse=False)):
                    if self.tracked(p) and layer is not None:
                        rec = self.lookup(p)
                        if rec is not None:
                            rec.layer = layer

        def write(self, f, header, ops=False):
            f.write("lms-trace 1\n")
            for h in header:
                f.write("# %s\n" % h)
            f.write("chunk 2MiB\n")
            for ln in self.lines:
                if ln[0] == "alloc":
                    act = "" if ln[3] is None else " act %d" % ln[3]
                    f.write("alloc %d %d%s\n" % (ln[1], ln[2], act))
                elif ln[0] == "free":
                    f.write("free %d\n" % ln[1])
                elif ln[0] == "kernel":
                    hint = "" if ln[3] is None else " layer %d %s" % (ln[2], ln[3])
                    f.write("kernel %d%s %s%s\n" % (ln[1], hint,
                                                    " ".join("%d:%s" % a for a in ln[4]),
                                                    "  # " + ln[5] if ops else ""))
                else:
                    f.write("iteration\n")

    return Recorder()


def meta_fallback(torch, func, args, kwargs):
    """Outputs for ops torch 1.13 has no meta kernel for (shapes only), or None."""
    if args and any(isinstance(a, torch.Tensor) and a.device.type != "meta" for a in args):
        return None
    name = op_name(func)

    def like(t):
        return torch.empty_like(t, memory_format=torch.contiguous_format)

    if name == "convolution_backward":
        grad_out, inp, weight, bias_sizes, mask = args[0], args[1], args[2], args[3], args[10]
        bias = (torch.empty(bias_sizes, dtype=grad_out.dtype, device="meta")
                if mask[2] and bias_sizes is not None else None)
        return (like(inp) if mask[0] else None, like(weight) if mask[1] else None, bias)
    if name in ("max_pool2d_with_indices_backward", "avg_pool2d_backward",
                "adaptive_avg_pool2d_backward", "_adaptive_avg_pool2d_backward"):
        return like(args[1])
    if name == "native_batch_norm_backward":
        grad_out, inp, weight, mask = args[0], args[1], args[2], args[-1]
        c = inp.shape[1]
        vec = (lambda: torch.empty(c, dtype=weight.dtype if weight is not None else inp.dtype,
                                   device="meta"))
        return (like(inp) if mask[0] else None, vec() if mask[1] else None,
                vec() if mask[2] else None)
    if name.endswith("_backward") and len(func._schema.returns) == 1:
        # elementwise activations' backward: (grad_output, self or result, ...) -> like it
        return like(args[0])
    return None


# ---- models -----------------------------------------------------------------------


def transformer_models(torch):
    nn, F = torch.nn, torch.nn.functional

    def attention(q, k, v, causal):
        if hasattr(F, "scaled_dot_product_attention"):  # torch 2.x
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        # the scale a tensor: torch 1.13 under a dispatch mode hands the hooks of
        # saved tensors a Python number for a scalar operand, which its
        # checkpoint's hooks cannot give back
        scale = torch.full((), 1 / math.sqrt(q.shape[-1]), dtype=q.dtype, device=q.device)
        s = (q * scale) @ k.transpose(-2, -1)
        if causal:
            n = q.shape[-2]
            mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
            s = s.masked_fill(mask, float("-inf"))
        return F.softmax(s, dim=-1) @ v

    class Block(nn.Module):
        def __init__(self, d, heads, causal, pre_norm):
            super().__init__()
            self.heads, self.causal, self.pre_norm = heads, causal, pre_norm
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.act, self.drop = nn.GELU(), nn.Dropout(0.1)

        def attn(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(
                2, 0, 3, 1, 4)
            y = attention(q, k, v, self.causal).transpose(1, 2).reshape(b, s, d)
            return self.drop(self.proj(y))

        def mlp(self, x):
            return self.drop(self.out(self.act(self.fc(x))))

        def forward(self, x):
            if self.pre_norm:  # GPT-2
                x = x + self.attn(self.ln1(x))
                return x + self.mlp(self.ln2(x))
            x = self.ln1(x + self.attn(x))  # BERT
            return self.ln2(x + self.mlp(x))

    class Net(nn.Module):
        def __init__(self, vocab, ctx, d, layers, heads, causal, ckpt=False):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.drop = nn.Dropout(0.1)
            self.blocks = nn.ModuleList(Block(d, heads, causal, causal) for _ in range(layers))
            self.ln = nn.LayerNorm(d) if causal else nn.Identity()
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied, as GPT-2's and BERT's are
            self.ckpt = ckpt

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.drop(self.tok(idx) + self.pos(pos))
            for b in self.blocks:
                if self.ckpt:
                    from torch.utils.checkpoint import checkpoint
                    x = checkpoint(b, x, use_reentrant=False)
                else:
                    x = b(x)
            return self.head(self.ln(x))

    return Net


def builtin(torch, name, batch, seq, small):
    """(model, (inputs, target), loss_fn, make_optimizer) for a built-in model."""
    F = torch.nn.functional
    if name in ("resnet18", "mobilenet_v3_large", "efficientnet_b0"):
        import torchvision
        model = getattr(torchvision.models, name)(num_classes=100 if small else 1000)
        n, side = batch or (2 if small else 64), 32 if small else 224
        x = torch.randn(n, 3, side, side)
        y = torch.randint(0, 100 if small else 1000, (n,))
        def sgd(params):
            return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4)
        return model, ((x,), y), F.cross_entropy, sgd
    Net = transformer_models(torch)
    vocab, d, layers, heads = (512, 64, 2, 4) if small else (None, 768, 12, 12)
    causal = name.startswith("gpt2")
    vocab = vocab or (50257 if causal else 30522)
    ctx = 1024 if causal else 512
    n, s = batch or (2 if small else 8), seq or (32 if small else 512)
    if s > ctx:
        die("--seq %d: %s's context is %d" % (s, name, ctx))
    model = Net(vocab, ctx, d, layers, heads, causal, ckpt=name == "gpt2_ckpt")
    idx = torch.randint(0, vocab, (n, s + 1))
    loss = lambda logits, y: F.cross_entropy(logits.flatten(0, 1), y.flatten())
    adamw = lambda params: torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    return model, ((idx[:, :-1],), idx[:, 1:]), loss, adamw


def user_model(torch, spec, batch, seq):
    modname, _, fname = spec.partition(":")
    if not modname or not fname:
        die("MODEL is one of %s, or module:function" % ", ".join(MODELS))
    sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(modname), fname)
    except (ImportError, AttributeError) as e:
        die("cannot load %s: %s" % (spec, e))
    got = fn(batch=batch, seq=seq)
    if not isinstance(got, tuple) or len(got) not in (3, 4):
        die("%s must return (model, batch, loss_fn) or (model, batch, loss_fn, make_optimizer)"
            % spec)
    model, b, loss = got[:3]
    make_opt = got[3] if len(got) == 4 else (lambda p: torch.optim.AdamW(p, lr=1e-4))
    if not (isinstance(b, tuple) and len(b) == 2):
        die("%s: batch must be (inputs, target)" % spec)
    inputs = b[0] if isinstance(b[0], tuple) else (b[0],)
    return model, (inputs, b[1]), loss, make_opt


# ---- recording --------------------------------------------------------------------


def prepare(torch, model, batch, make_opt, device, dtype):
    """model, inputs, target and optimizer on device, in dtype."""
    def place(t):
        t = t.to(device)
        return t.to(dtype) if t.is_floating_point() else t

    # parameters tied (one in two modules) stay tied: moving to meta makes new ones
    ties = {}
    for m in model.modules():
        for k, p in m._parameters.items():
            if p is not None:
                ties.setdefault(id(p), []).append((m, k))
    model = model.to(dtype).to(device)
    for group in ties.values():
        for m, k in group[1:]:
            setattr(m, k, getattr(group[0][0], group[0][1]))
    model.train()
    inputs, target = tuple(place(t) for t in batch[0]), place(batch[1])
    return model, inputs, target, make_opt(model.parameters())


def train(torch, model, inputs, target, loss_fn, opt, steps, rec=None):
    """steps training steps, recorded by rec; rec None: the plain run the checks measure."""
    def phase(p):
        if rec is not None:
            rec.phase = p

    def step():
        with rec.paused_copy() if rec is not None else contextlib.nullcontext():
            xs = tuple(t.clone() for t in inputs)  # the batch, as if copied from the host
            y = target.clone()
        if rec is not None:
            rec.upload(xs + (y,))
            rec.layer = 0
        phase("fwd")
        loss = loss_fn(model(*xs), y)
        if rec is not None and rec.step == 0:
            rec.set_param_layers(model)
        phase("bwd")
        loss.backward()
        phase("opt")
        opt.step()
        opt.zero_grad(set_to_none=True)
        phase(None)

    gc_was = gc.isenabled()
    gc.disable()
    null = contextlib.nullcontext()
    try:
        with rec or null, rec.hooks(model) if rec else null, no_profiler_marks(torch):
            if rec is not None:
                rec.upload(list(model.parameters()) + list(model.buffers()), params=True)
            for _ in range(steps):
                step()
                if rec is not None:
                    rec.end_step()
                else:
                    gc.collect()
    finally:
        if gc_was:
            gc.enable()


def record(torch, model, batch, loss_fn, make_opt, steps, device, dtype, gpu):
    """The recorder after `steps` training steps of model on device."""
    model, inputs, target, opt = prepare(torch, model, batch, make_opt, device, dtype)
    rec = make_recorder(torch, torch.device(device).type, gpu)
    train(torch, model, inputs, target, loss_fn, opt, steps, rec)
    return rec


@contextlib.contextmanager
def no_profiler_marks(torch):
    """torch.autograd.profiler.record_function a null context (Note [Host tensors])."""
    prof = torch.autograd.profiler
    saved = prof.record_function
    prof.record_function = lambda *a, **k: contextlib.nullcontext()
    try:
        yield
    finally:
        prof.record_function = saved


def parse(argv):
    p = argparse.ArgumentParser(
        prog="lms-trace-torch.py",
        description="Record a PyTorch training step as an lms trace (docs/trace-format.md).")
    p.add_argument("model", metavar="MODEL", help="%s, or module:function" % ", ".join(MODELS))
    p.add_argument("--batch", type=int, help="batch size (the model's default)")
    p.add_argument("--seq", type=int, help="sequence length of bert and gpt2 (512)")
    p.add_argument("--steps", type=int, default=3, help="training steps (3)")
    p.add_argument("--gpu", default="h100-pcie", help="the roofline's GPU: %s" % ", ".join(GPUS))
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--device", default="meta", choices=("meta", "cpu"))
    p.add_argument("--small", action="store_true",
                   help="the built-in model scaled down (for the checks: tests/tools/)")
    p.add_argument("--ops", action="store_true", help="name each kernel's aten op in a comment")
    p.add_argument("-o", "--output", help="the trace (.gz: gzipped); stdout without it")
    a = p.parse_args(argv)
    if a.gpu not in GPUS:
        p.error("--gpu %s: one of %s" % (a.gpu, ", ".join(GPUS)))
    for opt in ("batch", "seq", "steps"):
        v = getattr(a, opt)
        if v is not None and v < 1:
            p.error("--%s %d: at least 1" % (opt, v))
    return a


def main(argv):
    a = parse(argv)
    try:
        import torch
    except ImportError:
        die("needs PyTorch (Debian: apt-get install python3-torch python3-torchvision)")
    if a.model in MODELS:
        try:
            model, batch, loss_fn, make_opt = builtin(torch, a.model, a.batch, a.seq, a.small)
        except ImportError as e:
            die("%s needs torchvision: %s" % (a.model, e))
    else:
        model, batch, loss_fn, make_opt = user_model(torch, a.model, a.batch, a.seq)
    rec = record(torch, model, batch, loss_fn, make_opt, a.steps, a.device,
                 getattr(torch, a.dtype), a.gpu)
    header = ["%s, recorded by tools/lms-trace-torch.py with torch %s" % (a.model,
                                                                        torch.__version__),
              "%s%s, %d steps, %s on %s, --gpu %s (roofline)" % (
                  "batch %d" % a.batch if a.batch else "default batch",
                  ", seq %d" % a.seq if a.seq else "", a.steps, a.dtype, a.device, a.gpu),
              "peak of live bytes %d" % rec.peak_bytes]
    if a.output is None:
        rec.write(sys.stdout, header, a.ops)
    else:
        opener = gzip.open if a.output.endswith(".gz") else open
        with opener(a.output, "wt") as f:
            rec.write(f, header, a.ops)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
