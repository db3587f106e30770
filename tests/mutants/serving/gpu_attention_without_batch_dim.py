"""Bug: on a GPU, the kernel is handed (H, T, hd) tensors without their batch dimension.

The FlashAttention kernel takes (B, H, N, D); the CPU path's (H, T, hd) einsum-style code runs
without one, so a learner who moves to the kernel forgets to add it (and to take it off the
result). Only the GPU path runs the kernel: the CPU tests never see it, the rehearsal does.
"""

CAUGHT_BY = ["test_serving_tokens_per_second_on_the_gpu"]
EDITS = [
    (
        "return flash_attention(q[None], k[None], v[None], causal=True)[0]",
        "return flash_attention(q, k, v, causal=True)",
    ),
]
