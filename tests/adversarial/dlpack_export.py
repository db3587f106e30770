"""Cheat: sliding-window attention computed in NumPy, its inputs exported through DLPack.

`np.from_dlpack(tensor)` is refused, but `torch.to_dlpack` hands out a capsule that NumPy reads
through any object that offers it. Caught because exporting a tensor through DLPack, by any of
PyTorch's functions, fails inside a call.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "through DLPack"
REPLACE = {
    "sliding_window_attention": """
        class _Capsule:
            def __init__(self, t):
                self.capsule, self.device = torch.to_dlpack(t), t.__dlpack_device__()

            def __dlpack__(self, stream=None, **kwargs):
                return self.capsule

            def __dlpack_device__(self):
                return self.device


        def sliding_window_attention(q, k, v, window, sm_scale=None):
            import numpy as np

            _check_attention_inputs(q, k, v)
            _check_int("window", window, 1)
            B, H, Nq, D = q.shape
            Nk = k.shape[2]
            qn, kn, vn = (
                np.from_dlpack(_Capsule(t.detach().double().contiguous()))
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
