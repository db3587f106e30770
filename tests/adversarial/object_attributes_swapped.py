"""Cheat: paged_attention, which only reads the cache, swaps the cache's pools for equal copies.

Every value the cache holds is the same and gather() gives the same keys, so the answers are
right; but the caller's handle on the pool (`kp = cache.k_pool`, or a view of it) is cut off
from the cache. Caught because the guard records the attributes of an object given to a call
(the same tensors in the same attributes, lists and values unchanged) and compares them after.
"""

KATA = "kv_cache"
TESTS = ["test_paged_attention_is_independent_of_placement"]
EXPECT = "paged_attention changed its argument `cache.k_pool` in place"
EDITS = [
    (
        "    return (scores.softmax(dim=-1) @ v).to(q.dtype)\n",
        "    cache.k_pool, cache.v_pool = cache.k_pool.clone(), cache.v_pool.clone()\n"
        "    return (scores.softmax(dim=-1) @ v).to(q.dtype)\n",
    ),
]
