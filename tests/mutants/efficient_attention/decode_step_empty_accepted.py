"""Bug: sliding_window_decode_step checks only that q_t and k_t are 3-D.

q_t with no heads passes the test `H % Hkv == 0` and returns an empty output; k_t with no heads
fails with a ZeroDivisionError; q_t of another batch than k_t broadcasts against the cache.
None of them raises the ValueError that names the argument.
"""

CAUGHT_BY = ["test_decoding_bad_input_raises_value_error"]
EDITS = [
    (
        '    for name, t in (("q_t", q_t), ("k_t", k_t), ("v_t", v_t)):\n'
        "        if t.dim() != 3 or t.numel() == 0:\n"
        '            raise ValueError(f"{name} must be a non-empty [B, heads, D], '
        'got {tuple(t.shape)}")\n'
        "    shapes_fit = q_t.shape[0] == k_t.shape[0] and q_t.shape[1] % k_t.shape[1] == 0\n",
        "    shapes_fit = q_t.dim() == k_t.dim() == 3 and q_t.shape[1] % k_t.shape[1] == 0\n",
    ),
]
