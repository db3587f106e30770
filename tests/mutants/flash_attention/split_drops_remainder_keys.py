"""Bug: each split gets Nk // num_splits keys; the last Nk % num_splits keys are never read.

Floor division is the first thing one writes for sharing work; the remainder needs a ceiling.
"""

CAUGHT_BY = ["test_split_kv_decode_matches_oracle"]
EDITS = [
    (
        "keys_per_split = triton.cdiv(triton.cdiv(Nk, num_splits), BLOCK_N) * BLOCK_N",
        "keys_per_split = Nk // num_splits",
    ),
    (
        """    splits = triton.cdiv(Nk, keys_per_split)
""",
        """    splits = num_splits
""",
    ),
]
