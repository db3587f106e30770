"""Bug: the engine leaves the feed-forward to the model, which runs every expert on every token.

`forward_packed` works without `feed_forward`, so an engine that never passes one gives exact
tokens; but the grouped dispatch of level 1 is then never used, and each step pays for all the
experts.
"""

CAUGHT_BY = ["test_serve_flops_within_the_ideal"]
EDITS = [("attention, feed_forward)", "attention)")]
