"""Bug: update writes what fits, then raises for the overflow.

The ValueError is there, so the error test passes, but the tokens that fitted were written and
counted: after the refused call the cache is no longer what it was.
"""

CAUGHT_BY = ["test_refused_update_changes_nothing"]
EDITS = [
    (
        "        if start + T > S:\n"
        '            raise ValueError(f"k: {T} new tokens after {start} cached '
        'would pass max_seq_len={S}")\n'
        "        self.k[layer, :, :, start : start + T] = k\n"
        "        self.v[layer, :, :, start : start + T] = v\n"
        "        self.lengths[layer] = start + T\n",
        "        fits = min(T, S - start)\n"
        "        self.k[layer, :, :, start : start + fits] = k[:, :, :fits]\n"
        "        self.v[layer, :, :, start : start + fits] = v[:, :, :fits]\n"
        "        self.lengths[layer] = start + fits\n"
        "        if start + T > S:\n"
        '            raise ValueError(f"k: {T} new tokens after {start} cached '
        'would pass max_seq_len={S}")\n',
    ),
]
