"""Bug: crop rolls back layer 0 only.

seq_len reads layer 0, so the crop looks done; the other layers keep writing after the stale
tokens, and speculative-decoding rollbacks silently corrupt every layer but the first.
"""

CAUGHT_BY = [
    "test_crop_then_append_overwrites_the_tail",
    "test_crop_then_decode_equals_a_fresh_prefix",
]
EDITS = [
    ("self.lengths = [min(n, length) for n in self.lengths]", "self.lengths[0] = length"),
]
