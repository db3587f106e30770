"""Bug: the step budget counts a row's pending tokens but not its draft proposals.

The budget feels like "prompt tokens per step", and proposals feel like extra, free guesses. But
every proposal is a token the target reads in that call: a step of rows with k proposals each
then runs past `max_tokens_per_step`, and the step is as slow as the cap was meant to prevent.
"""

CAUGHT_BY = ["test_chunked_tokens_equal_naive_serve_within_every_budget"]
EDITS = [
    (
        "            seq.propose = min(self.k, left - 1, budget - seq.feed)\n",
        "            seq.propose = min(self.k, left - 1)\n",
    ),
]
