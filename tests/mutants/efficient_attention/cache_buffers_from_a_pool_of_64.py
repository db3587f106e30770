"""Bug: RollingKVCache takes its buffers from a pool of 64 shared by all caches of one shape.

Allocating two buffers for every new stream looks wasteful, so caches borrow them from a
module-level pool, round-robin. Two or three streams decoded in turn each get their own; the
65th cache alive gets the first one's buffers, and the two streams overwrite each other.
"""

CAUGHT_BY = ["test_decoding_more_than_64_caches_in_turn"]
EDITS = [
    (
        "class RollingKVCache:\n",
        "_POOL = {}  # (shape, dtype, device) -> [caches made, then 64 buffer pairs (k, v)]\n\n\n"
        "class RollingKVCache:\n",
    ),
    (
        "        self.k = torch.zeros(batch, n_kv_heads, window, head_dim, dtype=dtype, "
        "device=device)\n"
        "        self.v = torch.zeros_like(self.k)  # (B, Hkv, window, head_dim)\n",
        "        shape = (batch, n_kv_heads, window, head_dim)\n"
        "        pool = _POOL.setdefault((shape, dtype, str(device)), [0])\n"
        "        if len(pool) < 65:\n"
        "            k = torch.zeros(shape, dtype=dtype, device=device)\n"
        "            pool.append((k, torch.zeros_like(k)))\n"
        "        self.k, self.v = pool[1 + pool[0] % 64]\n"
        "        pool[0] += 1\n",
    ),
]
