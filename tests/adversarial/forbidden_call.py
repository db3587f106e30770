"""Cheat: tiled_attention hands the whole problem to PyTorch's fused attention.

scaled_dot_product_attention is exact and never builds the score matrix as one PyTorch op, so
the result and the largest-tensor count both look right; the online softmax, the point of the
level, is never written. Caught by the per-kata table of forbidden calls (grading/judge/rules.py).
"""

KATA = "flash_attention"
TESTS = ["test_tiled_attention_matches_oracle"]
EXPECT = "forbidden call: tiled_attention ran _scaled_dot_product"
REPLACE = {
    "tiled_attention": """
        def tiled_attention(q, k, v, causal=False, sm_scale=None, block_size=64):
            _check_inputs(q, k, v)
            if block_size < 1:
                raise ValueError(f"block_size must be at least 1, got {block_size}")
            group = q.shape[1] // k.shape[1]
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            Nq, Nk = q.shape[2], k.shape[2]
            mask = None
            if causal:
                rows = torch.arange(Nq)[:, None] + (Nk - Nq)
                mask = torch.arange(Nk)[None, :] <= rows
            out = torch.nn.functional.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), attn_mask=mask, scale=sm_scale
            )
            return out.nan_to_num(0.0).to(q.dtype)
    """,
}
