"""Bug: prompt lookup adds k_round to `proposed`, not the length of what the lookup found.

Copied from speculative_decode, where a draft always proposes k_round tokens; a lookup proposes
fewer, or none, and the acceptance rate computed from the stats comes out too low.
"""

CAUGHT_BY = ["test_prompt_lookup_calls_and_stats_follow_the_lookups"]
EDITS = [
    (
        "        stats.proposed += m\n",
        "        stats.proposed += k_round\n",
    ),
]
