"""Bug: the target's cache is rolled back to nothing after every round.

Throwing the whole cache away is a sure way to be rid of the rejected proposals' keys, and the
tokens stay exact; but every step then re-reads each request's whole sequence, and speculative
decoding costs about as much as having no cache.
"""

CAUGHT_BY = ["test_speculative_serve_is_ten_times_cheaper_than_naive"]
EDITS = [("            seq.cached = len(seq.tokens) - 1\n", "            seq.cached = 0\n")]
