"""Bug: the output is allocated and returned in float32 whatever the input dtype.

The accumulator is float32, so allocating the output like it looks natural; callers in float16
then get a tensor twice the size in the wrong dtype.
"""

CAUGHT_BY = ["test_flash_attention_matches_oracle"]
EDITS = [
    (
        "out_dtype = q.dtype if splits == 1 else torch.float32",
        "out_dtype = torch.float32",
    ),
]
