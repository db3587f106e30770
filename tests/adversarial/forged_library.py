"""Cheat: NumPy called from code that claims to be PyTorch's own.

PyTorch itself may read a tensor into NumPy (printing one does), and the check once trusted
the module name of the caller, which `exec` sets to anything. Caught because a library caller
is now known by the file its code lives in, and by the module loaded from that file.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "off the books: the implementation called .numpy()"
REPLACE = {
    "sliding_window_attention": """
        _FORGED = {"__name__": "torch.forged"}
        exec("def to_numpy(t):\\n    return t.numpy()\\n", _FORGED)


        def sliding_window_attention(q, k, v, window, sm_scale=None):
            import numpy as np

            _check_attention_inputs(q, k, v)
            _check_int("window", window, 1)
            B, H, Nq, D = q.shape
            Nk = k.shape[2]
            qn, kn, vn = (
                _FORGED["to_numpy"](t.detach().double())
                for t in (q, _expand_kv(k, H), _expand_kv(v, H))
            )
            scores = qn @ kn.swapaxes(-1, -2) * _softmax_scale(sm_scale, D)
            p = np.arange(Nq)[:, None] + (Nk - Nq)
            j = np.arange(Nk)[None, :]
            scores = np.where((j <= p) & (j > p - window), scores, -np.inf)
            top = np.nan_to_num(scores.max(-1, keepdims=True), neginf=0.0)
            e = np.exp(scores - top)
            out = e @ vn / np.maximum(e.sum(-1, keepdims=True), 1e-300)
            return torch.tensor(out).to(q.dtype)
    """,
}
