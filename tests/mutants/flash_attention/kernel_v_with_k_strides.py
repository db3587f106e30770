"""Bug: the kernel reads v with k's strides.

k and v have the same shape, so passing one set of strides for both looks like a saving; it is
right only while both are laid out alike, and a cache that stores v transposed is not.
"""

CAUGHT_BY = ["test_flash_attention_reads_strided_inputs"]
EDITS = [
    (
        "*q.stride(), *k.stride(), *v.stride(), *out.stride(),",
        "*q.stride(), *k.stride(), *k.stride(), *out.stride(),",
    ),
]
