"""Cheat: sliding-window attention computed in NumPy.

A dense masked softmax in NumPy gives the right numbers, and neither the FLOP counter nor the
largest-tensor tracker sees any of its N x N work. Caught by the guard that refuses `.numpy()`,
`__array__` and `.tolist()` of large floating-point tensors inside the implementation.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "off the books"
REPLACE = {
    "sliding_window_attention": """
        def sliding_window_attention(q, k, v, window, sm_scale=None):
            import numpy as np

            _check_attention_inputs(q, k, v)
            _check_int("window", window, 1)
            B, H, Nq, D = q.shape
            Nk = k.shape[2]
            qn = q.detach().double().numpy()
            kn = _expand_kv(k, H).detach().double().numpy()
            vn = _expand_kv(v, H).detach().double().numpy()
            scores = qn @ kn.swapaxes(-1, -2) * _softmax_scale(sm_scale, D)
            p = np.arange(Nq)[:, None] + (Nk - Nq)
            j = np.arange(Nk)[None, :]
            allowed = (j <= p) & (j > p - window)
            scores = np.where(allowed, scores, -np.inf)
            top = np.nan_to_num(scores.max(-1, keepdims=True), neginf=0.0)
            e = np.exp(scores - top)
            out = e @ vn / np.maximum(e.sum(-1, keepdims=True), 1e-300)
            return torch.from_numpy(out).to(q.dtype)
    """,
}
