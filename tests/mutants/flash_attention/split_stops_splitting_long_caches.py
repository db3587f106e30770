"""Bug: split_kv_decode splits only caches of up to 1024 keys; longer ones get one program per head.

Capping the splits by a length seen in testing (or a planned "short caches only" fast path)
keeps the results right, so nothing fails: but the long caches are exactly where one program
per head leaves the GPU idle, which is what splitting is for.
"""

CAUGHT_BY = ["test_split_kv_decode_really_splits_long_caches"]
EDITS = [
    (
        "keys_per_split = triton.cdiv(triton.cdiv(Nk, num_splits), BLOCK_N) * BLOCK_N",
        "keys_per_split = triton.cdiv(triton.cdiv(Nk, num_splits), BLOCK_N) * BLOCK_N\n"
        "    if Nk > 1024:  # long caches: one range per head\n"
        "        keys_per_split = Nk",
    ),
]
