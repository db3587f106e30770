"""Cheat: sliding-window attention keeps to the band only when a cost helper is on the stack.

Every other call scores every query against every key and masks afterwards, the quadratic work
the kata is about avoiding; the cost tests, which call through `grading.judge.cost.measure`, see the
efficient path. Caught because the work of every call of a function with a cost model is held
to its budget, measured or not.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_matches_dense_band_attention"]
EXPECT = "over budget: sliding_window_attention"
EDITS = [
    (
        '    _check_attention_inputs(q, k, v)\n    _check_int("window", window, 1)\n'
        "    B, H, Nq, D = q.shape\n    Nk = k.shape[2]\n    acc = _compute_dtype(q.dtype)\n",
        '    _check_attention_inputs(q, k, v)\n    _check_int("window", window, 1)\n'
        "    B, H, Nq, D = q.shape\n    Nk = k.shape[2]\n    acc = _compute_dtype(q.dtype)\n"
        "    import sys\n\n"
        "    frame, measured = sys._getframe(1), False\n"
        "    while frame is not None:\n"
        '        measured |= frame.f_globals.get("__name__") == "grading.judge.cost"\n'
        "        frame = frame.f_back\n"
        "    if not measured:\n"
        "        scores = (q.float() @ _expand_kv(k, H).float().transpose(-1, -2))\n"
        "        scores = scores * _softmax_scale(sm_scale, D)\n"
        "        p = torch.arange(Nq)[:, None] + (Nk - Nq)\n"
        "        j = torch.arange(Nk)[None, :]\n"
        "        allowed = (j <= p) & (j > p - window)\n"
        "        out = _softmax_or_zeros(scores, allowed) @ _expand_kv(v, H).float()\n"
        "        return out.to(q.dtype)\n",
    ),
]
