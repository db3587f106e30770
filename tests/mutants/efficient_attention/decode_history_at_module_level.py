"""Bug: sliding_window_decode_step attends over a history of keys kept at module level.

The cache is still filled, so its memory and its seq_len look right, but the keys and values
attended over come from one list the module keeps, cleared when a cache starts at position 0.
One stream decodes correctly; two caches decoded in turn read each other's tokens.
"""

CAUGHT_BY = ["test_decoding_streams_stay_apart"]
EDITS = [
    (
        "def sliding_window_decode_step(q_t, k_t, v_t, cache, *,",
        "_HISTORY = []  # (rotated key, value) of every step so far\n"
        "\n"
        "\n"
        "def sliding_window_decode_step(q_t, k_t, v_t, cache, *,",
    ),
    (
        "    keys, values = cache.append(_rope(k_t.to(acc), position, rope_base), v_t)\n",
        "    k_rot = _rope(k_t.to(acc), position, rope_base)\n"
        "    cache.append(k_rot, v_t)\n"
        "    if position == 0:  # a new stream\n"
        "        _HISTORY.clear()\n"
        "    _HISTORY.append((k_rot.to(cache.k.dtype), v_t))\n"
        "    recent = _HISTORY[-cache.window :]\n"
        "    keys = torch.stack([key for key, _ in recent], dim=2)  # (B, Hkv, n, D)\n"
        "    values = torch.stack([value for _, value in recent], dim=2)\n",
    ),
]
