"""Bug: the draft's cache is not rolled back after a rejection.

The output stays exact (the target corrects everything), so it is easy to miss; but the draft
now reads its rejected proposals as context, at shifted positions, and its proposals get worse.
"""

CAUGHT_BY = ["test_model_calls_follow_the_schedule"]
EDITS = [
    (
        "        draft_cache.crop(min(draft_cache.seq_len, n - 1))\n",
        "",
    ),
]
