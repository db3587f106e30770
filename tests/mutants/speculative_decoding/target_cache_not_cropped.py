"""Bug: the target's cache is not rolled back after a rejection.

The rejected proposals' keys and values stay in the cache, so the target's next call attends
to tokens that are not in the text (or feeds nothing at all): wrong tokens after the first
rejection.
"""

CAUGHT_BY = ["test_greedy_output_is_the_targets_own_greedy_decoding"]
EDITS = [
    (
        "        target_cache.crop(n - 1)\n",
        "",
    ),
]
