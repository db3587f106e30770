"""Cheat: sliding-window attention computed densely in a worker thread.

The counters are a dispatch mode, which PyTorch keeps per thread: work handed to a thread pool
ran where no counter was on (no FLOPs, no operators, no largest tensor). Caught because starting
a thread (or a process) inside a call, or while the implementation is imported, fails at once.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "threads and processes: the implementation started a thread"
REPLACE = {
    "sliding_window_attention": """
        def sliding_window_attention(q, k, v, window, sm_scale=None):
            from concurrent.futures import ThreadPoolExecutor

            _check_attention_inputs(q, k, v)
            _check_int("window", window, 1)
            H, Nq, D = q.shape[1], q.shape[2], q.shape[3]
            Nk = k.shape[2]

            def dense():
                scores = (q.float() @ _expand_kv(k, H).float().transpose(-1, -2))
                scores = scores * _softmax_scale(sm_scale, D)
                p = torch.arange(Nq)[:, None] + (Nk - Nq)
                j = torch.arange(Nk)[None, :]
                allowed = (j <= p) & (j > p - window)
                return _softmax_or_zeros(scores, allowed) @ _expand_kv(v, H).float()

            with ThreadPoolExecutor(max_workers=1) as pool:
                return pool.submit(dense).result().to(q.dtype)
    """,
}
