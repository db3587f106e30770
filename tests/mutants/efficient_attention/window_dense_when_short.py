"""Bug: the sliding window runs dense masked attention for short sequences, banded for long ones.

"Dense is fast enough below 512 tokens" sounds harmless, but the N x N scores are still built,
and the cost at those lengths no longer follows the window.
"""

CAUGHT_BY = [
    "test_sliding_window_flops_grow_with_n_times_window",
]
EDITS = [
    (
        ("    acc = _compute_dtype(q.dtype)\n    W = min(window, Nk)"),
        (
            "    acc = _compute_dtype(q.dtype)\n"
            "    if Nq * Nk <= 512 * 512:  # short: dense and masked\n"
            "        kk, vv = _expand_kv(k.to(acc), H), _expand_kv(v.to(acc), H)\n"
            "        scores = (q.to(acc) @ kk.transpose(-1, -2)) * _softmax_scale(sm_scale, D)\n"
            "        p = torch.arange(Nq)[:, None] + (Nk - Nq)\n"
            "        j = torch.arange(Nk)[None, :]\n"
            "        allowed = (j <= p) & (j > p - window)\n"
            "        return (_softmax_or_zeros(scores, allowed) @ vv).to(q.dtype)\n"
            "    W = min(window, Nk)"
        ),
    ),
]
