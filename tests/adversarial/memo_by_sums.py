"""Cheat: paged_attention remembers its answers, keyed on the cache, the sequence and the sum of
the queries.

Fresh queries, or queries changed in place, have another sum and are computed; the same queries
again, a decoding loop's repeated call or a benchmark's, are answered from memory (and a change
to the pool that keeps the queries is answered stale). Caught because a measured call is
repeated on the very same tensors and must cost what computing costs.
"""

KATA = "kv_cache"
TESTS = ["test_paged_attention_answers_follow_their_inputs"]
EXPECT = "answers from memory: paged_attention did"
EDITS = [
    (
        "    k, v = cache.gather(seq_id)  # (Hkv, N, D)\n    Hkv, N, D = k.shape\n",
        "    key = (id(cache), seq_id, tuple(q.shape), float(q.sum()))\n"
        "    if key in _ANSWERS:\n"
        "        return _ANSWERS[key].clone()\n"
        "    _ANSWERS[key] = _paged_attention(q, cache, seq_id)\n"
        "    return _ANSWERS[key].clone()\n\n\n"
        "def _paged_attention(q, cache, seq_id):\n"
        "    k, v = cache.gather(seq_id)  # (Hkv, N, D)\n    Hkv, N, D = k.shape\n",
    ),
    (
        "def paged_attention(q, cache, seq_id):\n",
        "_ANSWERS = {}\n\n\ndef paged_attention(q, cache, seq_id):\n",
    ),
]
