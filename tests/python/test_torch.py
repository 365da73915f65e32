"""lms.torch (python/lms/torch.py) on sim, with the environment test_lms.py
has (tests/python/python.cmake).

Where a PyTorch with CUDA exists (tools/gpu-session.sh's python_torch step)
use() runs for real; here the glue is checked three ways: against the
PyTorch this python has (Debian's python3-torch is CPU-only, and 1.13 has
neither CUDAPluggableAllocator nor register_step_post_hook: each refusal is
checked), against a stand-in torch module that records what use() asks of
it (the preload warning, the entry points, the library given), and against
a stand-in optimizer with register_step_post_hook (the iterations marked,
read back from lms's timeline).
"""
import os
import sys
import tempfile
import unittest

import lms
from test_lms import LIBRARY, iterations, run

try:
    import torch
except ImportError:
    torch = None

# A child's stand-in for PyTorch 2 with CUDA: CUDAPluggableAllocator and
# change_current_allocator print what they are given.
STAND_IN_TORCH = """
import sys, types, warnings
torch = types.ModuleType("torch")
torch.__version__ = "2.99 (stand-in)"
torch.version = types.SimpleNamespace(cuda="13.0")
class Allocator:
    def __init__(self, path, malloc, free):
        print("allocator", path, malloc, free)
def change(allocator):
    print("changed")
torch.cuda = types.SimpleNamespace(
    is_available=lambda: True, is_initialized=lambda: INITIALIZED,
    memory=types.SimpleNamespace(CUDAPluggableAllocator=Allocator,
                                 change_current_allocator=change))
sys.modules["torch"] = torch
import lms
warnings.simplefilter("always")
"""


class Use(unittest.TestCase):
    def use(self, initialized=False, env=None, check=True):
        code = STAND_IN_TORCH.replace("INITIALIZED", str(initialized)) + """
first = lms.torch.use()
assert lms.torch.use() is first          # once only
"""
        return run(code, env, check=check)

    def test_lms_becomes_the_allocator_with_its_entry_points(self):
        p = self.use(env={"LD_PRELOAD": LIBRARY})
        lines = p.stdout.splitlines()
        self.assertEqual(lines[1:], ["changed"])
        word, path, malloc, free = lines[0].split()
        self.assertEqual((word, malloc, free), ("allocator", "lms_torch_malloc", "lms_torch_free"))
        self.assertTrue(os.path.samefile(path, LIBRARY))
        self.assertNotIn("Warning", p.stderr)

    def test_without_the_preload_it_warns_that_lms_will_not_swap(self):
        p = self.use()
        self.assertIn("changed", p.stdout)
        self.assertIn("NotPreloadedWarning: lms.torch.use: %s is PyTorch's allocator but not this "
                      "process's preload, so lms cannot see what kernels touch and does not swap"
                      % os.path.realpath(LIBRARY), p.stderr)

    def test_cuda_already_initialized_is_refused(self):
        p = self.use(initialized=True, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertNotIn("changed", p.stdout)
        self.assertIn("RuntimeError: lms.torch.use: CUDA is already initialized in this process",
                      p.stderr)

    def test_without_torch_it_says_so(self):
        p = run("import sys; sys.modules['torch'] = None\nimport lms; lms.torch.use()", check=False)
        self.assertIn("ImportError: lms.torch.use: PyTorch is not installed for %s"
                      % sys.executable, p.stderr)

    @unittest.skipIf(torch is None, "no torch for this python")
    def test_this_torch_without_cuda_is_refused(self):
        if torch.cuda.is_available():
            self.skipTest("this torch has CUDA: tools/gpu-session.sh's python_torch step runs it")
        with self.assertRaisesRegex(RuntimeError, r"lms.torch.use: PyTorch %s (has no torch.cuda."
                                    r"memory.CUDAPluggableAllocator|.*(without CUDA|finds no CUDA "
                                    r"device))" % torch.__version__):
            lms.torch.use()
        self.assertFalse(torch.cuda.is_initialized())


# A child's stand-in optimizer: register_step_post_hook as
# torch.optim.Optimizer has it (hook(optimizer, args, kwargs) after each
# step; a handle whose remove() drops the hook).
STAND_IN_OPTIMIZER = """
class Optimizer:
    def __init__(self):
        self.hooks = {}
    def register_step_post_hook(self, hook):
        key, hooks = len(self.hooks), self.hooks
        class Handle:
            def remove(self):
                del hooks[key]
        hooks[key] = hook
        return Handle()
    def step(self):
        for hook in list(self.hooks.values()):
            hook(self, (), {})
opt = Optimizer()
step = opt.step
"""


# A child: three steps of the optimizer `opt` (step()) with lms.torch.mark_iterations, then
# the hook removed and two steps more (not marked).
MARKED_STEPS = """
import lms
%s
handle = lms.torch.mark_iterations(opt)
for _ in range(3):
    step()
handle.remove()
step(); step()
"""


class MarkIterations(unittest.TestCase):
    def marks(self, setup):
        with tempfile.TemporaryDirectory() as tmp:
            timeline = os.path.join(tmp, "timeline.json")
            run(MARKED_STEPS % setup, {"LMS_TRACE": timeline})
            return iterations(timeline)

    def test_each_step_is_marked_while_the_hook_is_there(self):
        self.assertEqual(self.marks(STAND_IN_OPTIMIZER), 3)

    def test_an_optimizer_without_step_hooks_is_refused(self):
        with self.assertRaisesRegex(RuntimeError, r"lms.torch.mark_iterations: object( of PyTorch "
                                    r"\S+)? has no register_step_post_hook .*call "
                                    r"lms.mark_iteration\(\) after each optimizer.step\(\) "
                                    r"instead"):
            lms.torch.mark_iterations(object())

    @unittest.skipIf(torch is None, "no torch for this python")
    @unittest.skipUnless(torch and hasattr(torch.optim.Optimizer, "register_step_post_hook"),
                         "this torch has no Optimizer.register_step_post_hook (PyTorch 2.0)")
    def test_a_torch_optimizer_on_the_cpu(self):
        self.assertEqual(self.marks("""
import torch
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step():
    opt.zero_grad()
    model(torch.ones(4, 8)).sum().backward()
    opt.step()
"""), 3)

    @unittest.skipIf(torch is None, "no torch for this python")
    @unittest.skipIf(torch and hasattr(torch.optim.Optimizer, "register_step_post_hook"),
                     "this torch has step hooks: test_a_torch_optimizer_on_the_cpu runs")
    def test_a_torch_optimizer_without_step_hooks_is_refused(self):
        opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
        with self.assertRaisesRegex(RuntimeError, "SGD of PyTorch %s has no "
                                    "register_step_post_hook" % torch.__version__):
            lms.torch.mark_iterations(opt)


if __name__ == "__main__":
    unittest.main(verbosity=2)
