"""Bug: paged_attention keeps each sequence's widened keys and values, keyed by id and length.

Upcasting the whole history on every decoding step looks wasteful, so the float32 copies are
kept on the cache and reused while the sequence has not grown. A freed id appended to again,
to the same length, then attends over the freed sequence's keys.
"""

CAUGHT_BY = ["test_a_freed_id_starts_afresh"]
EDITS = [
    (
        "    k, v = cache.gather(seq_id)  # (Hkv, N, D)\n",
        "    memo = cache.__dict__.setdefault('widened', {})\n"
        "    if (seq_id, cache.length(seq_id)) not in memo:\n"
        "        memo[(seq_id, cache.length(seq_id))] = cache.gather(seq_id)\n"
        "    k, v = memo[(seq_id, cache.length(seq_id))]  # (Hkv, N, D)\n",
    ),
]
