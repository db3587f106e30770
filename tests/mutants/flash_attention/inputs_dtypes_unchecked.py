"""Bug: the input checks compare shapes but not dtypes, so q, k and v of mixed dtypes are accepted.

Upcasting everything to float32 inside makes mixed inputs "work", which hides a caller's mistake
(a float16 cache read with float32 queries) instead of refusing it.
"""

CAUGHT_BY = ["test_tiled_attention_refuses_bad_inputs", "test_flash_attention_refuses_bad_inputs"]
EDITS = [
    (
        """    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
""",
        "",
    ),
]
