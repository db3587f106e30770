"""Cheat: sliding-window attention remembers answers computed before it is measured.

At import it precomputes the answers for the inputs a cost test is likely to draw and returns
those from a table when they come; other inputs are computed. Caught because a measured call is
repeated on fresh values of the same shapes: there it costs what computing costs, far more than
the remembered answer did.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_flops_grow_with_n_times_window"]
EXPECT = "answers from memory: sliding_window_attention cost 0 FLOPs"
EDITS = [
    (
        "def sliding_window_attention(q, k, v, window, sm_scale=None):\n",
        "_REMEMBERED = {}\n"
        "\n"
        "\n"
        "def sliding_window_attention(q, k, v, window, sm_scale=None):\n"
        "    key = (tuple(q.shape), window, q[0, 0, 0, 0].item(), k[0, 0, 0, 0].item())\n"
        "    if key in _REMEMBERED:\n"
        "        return _REMEMBERED[key].clone()\n"
        "    return _band_attention(q, k, v, window, sm_scale)\n"
        "\n"
        "\n"
        "def _remember():\n"
        "    from grading.judge.strategies import randn\n"
        "\n"
        "    for N in (512, 1024):\n"
        "        q, k, v = (randn((1, 2, N, 16), seed=s) for s in range(3))\n"
        "        for window in (1, 16):\n"
        "            key = (tuple(q.shape), window, q[0, 0, 0, 0].item(), k[0, 0, 0, 0].item())\n"
        "            _REMEMBERED[key] = _band_attention(q, k, v, window)\n"
        "\n"
        "\n"
        "def _band_attention(q, k, v, window, sm_scale=None):\n",
    ),
    ("\n\ndef block_sparse_attention(", "\n\n_remember()\n\n\ndef block_sparse_attention("),
]
