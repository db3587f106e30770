"""Cheat: sliding-window attention writes every answer into one buffer it keeps.

It saves an allocation per call, and each result is right when it is returned; but the next
call of the same shape overwrites the caller's earlier result. Caught because a measured call
is repeated, and two results in the same memory are reported as aliasing.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_flops_grow_with_n_times_window"]
EXPECT = "aliasing: sliding_window_attention returned the same tensor"
EDITS = [
    (
        "def sliding_window_attention(q, k, v, window, sm_scale=None):\n",
        "_BUFFERS = {}\n"
        "\n"
        "\n"
        "def sliding_window_attention(q, k, v, window, sm_scale=None):\n"
        "    out = _band_attention(q, k, v, window, sm_scale)\n"
        "    buffer = _BUFFERS.setdefault((out.shape, out.dtype), torch.empty_like(out))\n"
        "    return buffer.copy_(out)\n"
        "\n"
        "\n"
        "def _band_attention(q, k, v, window, sm_scale=None):\n",
    ),
]
