"""Bug: the sliding window builds dense scores by broadcasting: (q[..., None, :] * k).sum(-1).

Elementwise products and sums cost no FLOPs in the FLOP counter, so this looks free there; it
still writes Nq x Nk x D elements, four times as many when N doubles.
"""

CAUGHT_BY = [
    "test_sliding_window_flops_grow_with_n_times_window",
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
    scores = (q.to(acc)[:, :, :, None, :] * kk[:, :, None, :, :]).sum(-1)  # (B, H, Nq, Nk)
    scores = scores * _softmax_scale(sm_scale, D)
    p = torch.arange(Nq)[:, None] + (Nk - Nq)
    j = torch.arange(Nk)[None, :]
    probs = _softmax_or_zeros(scores, (j <= p) & (j > p - window))
    return (probs[..., None] * vv[:, :, None]).sum(-2).to(q.dtype)  # (B, H, Nq, Dv)
""",
}
