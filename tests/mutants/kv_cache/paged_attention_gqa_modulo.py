"""Bug: paged_attention gives query head h the kv head h % n_kv_heads.

`repeat` tiles the kv heads (0, 1, 0, 1) where grouped-query attention needs each one repeated in
place (0, 0, 1, 1). With one kv head, or as many as query heads, both agree.
"""

CAUGHT_BY = ["test_paged_attention_is_independent_of_placement"]
EDITS = [
    (
        "k = k.repeat_interleave(H // Hkv, dim=0).to(wide)  # (H, N, D)\n"
        "    v = v.repeat_interleave(H // Hkv, dim=0).to(wide)",
        "k = k.repeat(H // Hkv, 1, 1).to(wide)  # (H, N, D)\n"
        "    v = v.repeat(H // Hkv, 1, 1).to(wide)",
    ),
]
