"""Bug: when blocks run out, the oldest running request is preempted instead of the newest.

Evicting the first in the list is the usual cache policy elsewhere; here it throws away the
request with the most work done (and possibly one already scheduled in this very step).
"""

CAUGHT_BY = ["test_kv_blocks_are_never_over_committed_and_preemption_is_exact"]
EDITS = [("victim = running.pop()", "victim = running.pop(0)")]
