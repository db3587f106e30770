"""Bug: a growing sequence takes the last blocks of the free list without removing them.

`free[-n:]` reads like "take n blocks", and a slice copies: the pool still lists them as free,
hands them to the next sequence too, and never runs out, so two requests write their keys into
the same block.
"""

CAUGHT_BY = [
    "test_a_request_may_fill_the_whole_context",
    "test_serve_tokens_equal_naive_serve_within_every_budget",
]
EDITS = [
    (
        "        for _ in range(self.needs(seq)):\n"
        "            block, _ = self.queue.popitem(last=False)  # the least recently freed\n",
        "        for i in range(self.needs(seq)):\n"
        "            block = list(self.queue)[i]  # looked at, left in the free queue\n",
    ),
]
