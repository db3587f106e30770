"""Bug: PagedKVCache.append writes the keys into the pool before it checks v.

Checking each argument where it is first used reads naturally; but a v of the wrong dtype is
then refused after the keys have landed in the pool (and blocks were taken), so a refused call
has changed the cache.
"""

CAUGHT_BY = ["test_append_of_bad_input_leaves_the_pool_alone"]
EDITS = [
    (
        '        _, Hkv, bs, D = self.k_pool.shape\n        for name, x in (("k", k), ("v", v)):\n',
        '        _, Hkv, bs, D = self.k_pool.shape\n        for name, x in (("k", k),):\n',
    ),
    (
        "        self.v_pool[blocks, :, offsets] = v.transpose(0, 1)\n",
        "        if v.shape != k.shape or v.dtype != self.k_pool.dtype:\n"
        '            raise ValueError(f"v: expected k\'s shape and dtype, got {list(v.shape)}")\n'
        "        self.v_pool[blocks, :, offsets] = v.transpose(0, 1)\n",
    ),
]
