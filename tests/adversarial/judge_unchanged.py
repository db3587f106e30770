"""Cheat: the implementation loosens the checks that judge it.

On import it replaces the FlashAttention-style error rule and the FLOP counter with ones that
always pass. Caught because the judge (every attribute of grading, of the test modules, and of
the PyTorch modules the oracles and counters use) is recorded before the implementation is
imported and compared after each test.
"""

KATA = "kv_cache"
TESTS = ["test_kv_cache_bytes_of_real_models"]
EXPECT = "the judge was changed"
EDITS = [
    (
        "import torch\n",
        "import torch\n"
        "import torch.utils.flop_counter\n\n"
        "import grading.judge.tolerance\n\n"
        "grading.judge.tolerance.assert_error_within = lambda *args, **kwargs: None\n"
        "torch.utils.flop_counter.FlopCounterMode.get_total_flops = lambda self: 0\n",
    ),
]
