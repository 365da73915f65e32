"""lms with PyTorch: lms as its CUDA allocator, and iterations marked by its
optimizer. PyTorch is imported only when these are called, so `import lms`
works without it.

    import lms
    lms.torch.use()                        # before any CUDA tensor
    model = ...; opt = torch.optim.SGD(...)
    lms.torch.mark_iterations(opt)         # lms.mark_iteration() after each step

lms can swap only what it sees kernels touch, which takes the preload
(LD_PRELOAD=liblms.so, or lms-run): loaded as PyTorch's allocator alone, lms
runs with LMS_DEVICE_LIMIT as a hard limit, without swapping (lms_torch.h),
and use() warns.
"""
import sys
import warnings

_allocator = None  # the CUDAPluggableAllocator use() installed


class NotPreloadedWarning(RuntimeWarning):
    """lms is PyTorch's allocator without being the process's preload: it
    cannot see kernels, so it does not swap."""


def _torch(what):
    try:
        import torch
    except ImportError as e:
        raise ImportError("%s: PyTorch is not installed for %s (%s)" % (what, sys.executable, e))
    return torch


def use():
    """Makes lms PyTorch's CUDA allocator (torch.cuda.memory.CUDAPluggableAllocator
    over lms_torch_malloc and lms_torch_free, from the liblms.so this process
    uses: lms.library_path()). Call it before anything touches CUDA: PyTorch
    cannot change the allocator of a CUDA it has started. Calling it again
    returns the same allocator.

    Raises ImportError without PyTorch, and RuntimeError when this PyTorch
    has no pluggable allocator (before 2.0) or no CUDA, or when CUDA is
    already initialized. Warns (NotPreloadedWarning) when liblms.so is not
    the process's preload: lms then does not swap, and LMS_DEVICE_LIMIT is a
    hard limit (what a stress test on a small GPU may want)."""
    global _allocator
    if _allocator is not None:
        return _allocator
    torch = _torch("lms.torch.use")
    memory = getattr(torch.cuda, "memory", None)
    if not hasattr(memory, "CUDAPluggableAllocator"):
        raise RuntimeError("lms.torch.use: PyTorch %s has no "
                           "torch.cuda.memory.CUDAPluggableAllocator (PyTorch 2.0 or later has "
                           "it); run under LD_PRELOAD=liblms.so (lms-run) instead"
                           % torch.__version__)
    if torch.version.cuda is None:
        raise RuntimeError("lms.torch.use: PyTorch %s was built without CUDA"
                           % torch.__version__)
    if not torch.cuda.is_available():
        raise RuntimeError("lms.torch.use: PyTorch %s (CUDA %s) finds no CUDA device"
                           % (torch.__version__, torch.version.cuda))
    if torch.cuda.is_initialized():
        raise RuntimeError("lms.torch.use: CUDA is already initialized in this process (a CUDA "
                           "tensor or a torch.cuda call came first), and PyTorch cannot change "
                           "the allocator then: call lms.torch.use() first")
    from . import _library

    lib = _library.library()
    if not lib.preloaded:
        warnings.warn("lms.torch.use: %s is PyTorch's allocator but not this process's "
                      "preload, so lms cannot see what kernels touch and does not swap: "
                      "LMS_DEVICE_LIMIT is a hard limit. To swap, run the program under "
                      "LD_PRELOAD=%s (or lms-run)" % (lib.path, lib.path),
                      NotPreloadedWarning, stacklevel=2)
    allocator = memory.CUDAPluggableAllocator(lib.path, "lms_torch_malloc", "lms_torch_free")
    memory.change_current_allocator(allocator)
    _allocator = allocator
    return allocator


def mark_iterations(optimizer):
    """Calls lms.mark_iteration() after every step of `optimizer` (a
    torch.optim.Optimizer), through its register_step_post_hook, so that
    lms's schedule follows the program's steps. Returns the hook's handle
    (handle.remove() stops it). RuntimeError where the optimizer has no
    register_step_post_hook (PyTorch before 2.0): call lms.mark_iteration()
    after each optimizer.step() there."""
    register = getattr(optimizer, "register_step_post_hook", None)
    if register is None:
        torch = sys.modules.get("torch")
        raise RuntimeError("lms.torch.mark_iterations: %s%s has no register_step_post_hook "
                           "(PyTorch 2.0 or later has it): call lms.mark_iteration() after each "
                           "optimizer.step() instead"
                           % (type(optimizer).__name__,
                              " of PyTorch " + torch.__version__ if torch else ""))
    from . import mark_iteration

    return register(lambda opt, args, kwargs: mark_iteration())
