"""Cheat: the implementation swaps the code inside the judge's tolerance check.

Assigning a new `__code__` to `grading.judge.tolerance.assert_close` keeps the function object, so a
snapshot of attributes by identity sees nothing. Caught because the judge's snapshot also holds
every function's code, defaults and closure, and is checked after every call.
"""

KATA = "kv_cache"
TESTS = ["test_kv_cache_bytes_of_real_models"]
EXPECT = "assert_close.__code__"
EDITS = [
    (
        "import torch\n",
        "import torch\n\n"
        "import grading.judge.tolerance\n\n"
        "grading.judge.tolerance.assert_close.__code__ = (lambda *args, **kwargs: None).__code__\n",
    ),
]
