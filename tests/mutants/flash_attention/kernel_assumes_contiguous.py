"""Bug: the launcher passes strides computed from the shapes, as if q, k and v were contiguous.

Tensors made in a quick test are contiguous, so flat offsets b*H*N*D + h*N*D + n*D + d work
there; q, k and v cut from one projection and viewed as (B, H, N, D) are not.
"""

CAUGHT_BY = ["test_flash_attention_reads_strided_inputs"]
EDITS = [
    (
        "*q.stride(), *k.stride(), *v.stride(), *out.stride(),",
        """H * Nq * D, Nq * D, D, 1, Hkv * Nk * D, Nk * D, D, 1, Hkv * Nk * D, Nk * D, D, 1,
        *out.stride(),""",
    ),
]
