"""Bug: block-sparse attention expands the block mask to tokens and runs dense masked attention.

Right numbers at dense cost: N x N scores and an N x N mask, whatever fraction of blocks is kept.
"""

CAUGHT_BY = [
    "test_block_sparse_flops_follow_the_allowed_blocks",
    "test_block_sparse_memory_follows_the_allowed_blocks",
]
REPLACE = {
    "block_sparse_attention": """
def block_sparse_attention(q, k, v, block_mask, block_size, causal=False, sm_scale=None):
    _check_attention_inputs(q, k, v)
    B, H, N, D = q.shape
    nb = -(-N // block_size)
    if k.shape[2] != N or block_mask.dtype != torch.bool or tuple(block_mask.shape) != (nb, nb):
        raise ValueError(f"block_mask must be bool [{nb}, {nb}] and Nk == Nq")
    acc = _compute_dtype(q.dtype)
    kk, vv = _expand_kv(k.to(acc), H), _expand_kv(v.to(acc), H)
    scores = (q.to(acc) @ kk.transpose(-1, -2)) * _softmax_scale(sm_scale, D)  # (B, H, N, N)
    allowed = block_mask.repeat_interleave(block_size, 0).repeat_interleave(block_size, 1)[:N, :N]
    if causal:
        allowed = allowed & torch.ones(N, N, dtype=torch.bool).tril()
    return (_softmax_or_zeros(scores, allowed) @ vv).to(q.dtype)
""",
}
