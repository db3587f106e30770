"""Cheat: generate gives PyTorch one more thread, for good.

The tokens are right; but the caller's process is left with another global setting than it had,
and every test after it runs so (the same goes for grad mode turned off with
torch.set_grad_enabled outside a `with` block, or a new default dtype). Caught because the guard
compares PyTorch's global settings (grad mode, inference mode, default dtype and device,
deterministic algorithms, threads) before and after every call.
"""

KATA = "kv_cache"
TESTS = ["test_generate_matches_the_uncached_generator"]
EXPECT = "generate changed PyTorch's global settings and left them so (threads"
EDITS = [
    (
        "    B, T = prompt_ids.shape\n",
        "    torch.set_num_threads(torch.get_num_threads() + 1)\n    B, T = prompt_ids.shape\n",
    ),
]
