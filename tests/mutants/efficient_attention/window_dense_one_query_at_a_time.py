"""Bug: the sliding window scores each query against all keys by broadcasting, one query at a time.

No tensor is large and no matrix product is counted, yet every query still touches every key:
Nq x Nk x D elements written in total, which quadruples when N doubles.
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
    j = torch.arange(Nk)
    rows = []
    for i in range(Nq):
        p = i + Nk - Nq
        scores = (q[:, :, i, None, :].to(acc) * kk).sum(-1) * _softmax_scale(sm_scale, D)
        probs = _softmax_or_zeros(scores, (j <= p) & (j > p - window))  # (B, H, Nk)
        rows.append((probs[..., None] * vv).sum(-2))  # (B, H, Dv)
    return torch.stack(rows, dim=2).to(q.dtype)
""",
}
