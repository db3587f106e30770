"""Bug: the sliding window computes dense Nq x Nk scores and masks everything outside the band.

The numbers are right, at the full quadratic price: doubling N quadruples the work and an N x N
score matrix is built, whatever the window.
"""

CAUGHT_BY = [
    "test_sliding_window_flops_grow_with_n_times_window",
    "test_sliding_window_memory_stays_in_the_band",
]
REPLACE = {
    "sliding_window_attention": """
def sliding_window_attention(q, k, v, window, sm_scale=None):
    _check_attention_inputs(q, k, v)
    _check_int("window", window, 1)
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    acc = _compute_dtype(q.dtype)
    kk, vv = _expand_kv(k.to(acc), H), _expand_kv(v.to(acc), H)
    scores = (q.to(acc) @ kk.transpose(-1, -2)) * _softmax_scale(sm_scale, D)  # (B, H, Nq, Nk)
    p = torch.arange(Nq)[:, None] + (Nk - Nq)
    j = torch.arange(Nk)[None, :]
    allowed = (j <= p) & (j > p - window)
    return (_softmax_or_zeros(scores, allowed) @ vv).to(q.dtype)
""",
}
