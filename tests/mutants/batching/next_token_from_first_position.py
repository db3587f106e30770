"""Bug: the next token is read from the first position of each row's logits.

For a decode row of one token, position 0 is the last position, so decoding looks right; for a
prompt it is the prediction after the first prompt token, not after the whole prompt.
"""

CAUGHT_BY = ["test_static_groups_are_exactly_as_defined"]
EDITS = [("ready = [(seq, out[-1]) for", "ready = [(seq, out[0]) for")]
