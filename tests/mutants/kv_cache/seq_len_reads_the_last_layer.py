"""Bug: seq_len reports the last layer's length instead of layer 0's.

Between model calls every layer holds the same number of tokens, so the two agree; inside a call,
after layer 0 has taken the new tokens, seq_len still reports the old length, against the contract.
"""

CAUGHT_BY = ["test_update_returns_everything_appended"]
EDITS = [("return self.lengths[0]", "return self.lengths[-1]")]
