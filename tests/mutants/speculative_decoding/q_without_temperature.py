"""Bug: the draft samples its proposal at the temperature but hands accept_reject the untempered q.

Any draft is allowed, so untempered q would be fine if the proposals came from it; here they come
from another distribution than the q the rule divides by, and the output drifts from the target.
"""

CAUGHT_BY = ["test_samples_follow_the_targets_own_distribution"]
EDITS = [
    (
        (
            "            q[i] = _probs(draft(unread, draft_cache)[0, -1], temperature)\n"
            "            out[0, n + i] = _sample(q[i], generator)[0]\n"
        ),
        (
            "            draft_logits = draft(unread, draft_cache)[0, -1]\n"
            "            q[i] = _probs(draft_logits, 1.0 if temperature else 0.0)\n"
            "            out[0, n + i] = _sample(_probs(draft_logits, "
            "temperature), generator)[0]\n"
        ),
    ),
]
