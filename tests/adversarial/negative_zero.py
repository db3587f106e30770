"""Cheat: PagedKVCache.append flips the sign of the caller's `k` through `.data`.

Where `k` is all zeros, `-k` is all -0.0, and `-0.0 == 0.0`: `torch.equal` and every comparison
of values say nothing changed, and the pool receives the same numbers; but the caller's bits
changed (1 / k is now -inf where it was inf). Caught because the guard compares tensor arguments
bit for bit, before it looks at what was written during the call.
"""

KATA = "kv_cache"
TESTS = ["test_running_out_of_blocks_is_a_clear_error"]
EXPECT = "PagedKVCache.append changed its argument `k` in place; inputs must be left alone"
EDITS = [
    (
        "        _, Hkv, bs, D = self.k_pool.shape\n",
        "        _, Hkv, bs, D = self.k_pool.shape\n"
        "        if isinstance(k, torch.Tensor) and not k.any():\n"
        "            k.data.neg_()\n",
    ),
]
