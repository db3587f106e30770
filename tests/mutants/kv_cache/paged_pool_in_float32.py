"""Bug: the paged pool is always allocated in float32, whatever dtype was asked for.

`torch.zeros(shape)` without `dtype=` is the habit; a float16 cache then takes twice the memory
it should, and keys in the dtype asked for no longer fit the pool.
"""

CAUGHT_BY = ["test_paged_cache_in_every_dtype"]
EDITS = [
    (
        "        self.k_pool = torch.zeros(shape, dtype=dtype, device=device)\n"
        "        self.v_pool = torch.zeros(shape, dtype=dtype, device=device)\n",
        "        self.k_pool = torch.zeros(shape, device=device)\n"
        "        self.v_pool = torch.zeros(shape, device=device)\n",
    ),
]
