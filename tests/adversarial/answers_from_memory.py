"""Cheat: sliding-window attention remembers answers computed before it is measured.

It computes dense N x N attention (quadratic work), but at import it precomputes the answers for
the inputs a cost test is likely to draw and returns those from a table when they come. Caught
because a measured call is repeated on fresh values of the same shapes: there it costs what
computing costs, far more than the remembered answer did.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_flops_grow_with_n_times_window"]
EXPECT = "answers from memory: sliding_window_attention cost 0 FLOPs"
REPLACE = {
    "sliding_window_attention": """
        _REMEMBERED = {}


        def sliding_window_attention(q, k, v, window, sm_scale=None):
            key = (tuple(q.shape), window, q[0, 0, 0, 0].item(), k[0, 0, 0, 0].item())
            if key in _REMEMBERED:
                return _REMEMBERED[key].clone()
            _check_attention_inputs(q, k, v)
            _check_int("window", window, 1)
            H, Nq, D = q.shape[1], q.shape[2], q.shape[3]
            Nk = k.shape[2]
            scores = (q.float() @ _expand_kv(k, H).float().transpose(-1, -2)) * _softmax_scale(
                sm_scale, D
            )
            p = torch.arange(Nq)[:, None] + (Nk - Nq)
            j = torch.arange(Nk)[None, :]
            allowed = (j <= p) & (j > p - window)
            out = _softmax_or_zeros(scores, allowed) @ _expand_kv(v, H).float()
            return out.to(q.dtype)


        def _remember():
            from grading.strategies import randn

            for N in (512, 1024):
                q, k, v = (randn((1, 2, N, 16), seed=s) for s in range(3))
                for window in (1, 16):
                    key = (tuple(q.shape), window, q[0, 0, 0, 0].item(), k[0, 0, 0, 0].item())
                    _REMEMBERED[key] = sliding_window_attention(q, k, v, window)


        _remember()
    """,
}
