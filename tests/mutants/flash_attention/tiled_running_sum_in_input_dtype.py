"""Bug: the running sum l is kept in the input dtype (float16 for float16 inputs).

Allocating the state like the inputs looks tidy and is right on short sequences; over thousands
of keys l grows past 2048, where float16 steps by 2, and the small weights stop counting.
"""

CAUGHT_BY = ["test_tiled_attention_keeps_float32_sums_over_long_sequences"]
EDITS = [
    (
        "l = torch.zeros((B, Hkv, group, Nq, 1), device=q.device)",
        "l = torch.zeros((B, Hkv, group, Nq, 1), device=q.device, dtype=q.dtype)",
    ),
    (
        "l = l * alpha + p.sum(dim=-1, keepdim=True)",
        "l = (l * alpha + p.sum(dim=-1, keepdim=True)).to(q.dtype)",
    ),
]
