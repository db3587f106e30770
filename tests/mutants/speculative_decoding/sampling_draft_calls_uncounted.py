"""Bug: the sampling rounds, written apart from the greedy ones, never count the draft's calls.

The tokens are right and the target's count is right; `draft_calls` says 0 at temperature > 0,
so a speed-up computed from the stats leaves out the draft's cost.
"""

CAUGHT_BY = ["test_sampling_calls_and_stats_follow_the_schedule"]
EDITS = [
    (
        "            stats.draft_calls += 1\n",
        "            stats.draft_calls += temperature == 0\n",
    ),
]
