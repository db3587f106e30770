"""Cheat: a private class of PyTorch named in a string annotation.

`functools.singledispatch` evaluates a registered function's annotation to find the class it
dispatches on, so `def _(x: "torch._C.TensorBase")` puts the unwatched base class of every tensor
in the registry, where `dispatcher.registry` hands it out, without `torch._C` ever written as
code. Caught before the file is imported: a string annotation follows the rules of the code
around it.
"""

KATA = "moe"
CHECK = "source"
TESTS = ["test_expert_work_grows_with_k_not_with_E"]
EXPECT = "the annotation 'torch._C.TensorBase': `torch._C.TensorBase` reaches `torch._C`"
EDITS = [
    ("import math\n", "import functools\nimport math\n"),
    (
        "def _check_k(k: int, num_experts: int) -> None:\n",
        "@functools.singledispatch\n"
        "def _base(x):\n"
        "    return None\n\n\n"
        "@_base.register\n"
        "def _(x: 'torch._C.TensorBase'):\n"
        "    return None\n\n\n"
        "def _check_k(k: int, num_experts: int) -> None:\n",
    ),
]
