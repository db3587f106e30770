"""Cheat: sliding-window attention remembers answers by the tensors' identity and version.

A memory keyed on `id` and `_version` of the inputs never answers fresh values, so the
fresh-values re-run computes; but every benchmark loop that calls again on the same tensors gets
its answer for free. Caught because a measured call is repeated on the very same tensors, and
must cost what computing costs there too.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_flops_grow_with_n_times_window"]
EXPECT = "answers from memory: sliding_window_attention did"
EDITS = [
    (
        "def sliding_window_attention(q, k, v, window, sm_scale=None):\n",
        "_REMEMBERED = {}\n"
        "\n"
        "\n"
        "def sliding_window_attention(q, k, v, window, sm_scale=None):\n"
        "    key = tuple((id(t), t._version) for t in (q, k, v)) + (window, sm_scale)\n"
        "    if key not in _REMEMBERED:\n"
        "        _REMEMBERED[key] = _band_attention(q, k, v, window, sm_scale)\n"
        "    return _REMEMBERED[key].clone()\n"
        "\n"
        "\n"
        "def _band_attention(q, k, v, window, sm_scale=None):\n",
    ),
]
