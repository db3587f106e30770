"""Bug: without a generator, the draft samples its proposals from a generator seeded 0.

accept_reject still draws from torch's global generator, so different global seeds give
different continuations and the run looks random; but the proposals are no longer drawn from
q, and the acceptance rule only corrects proposals that were.
"""

CAUGHT_BY = ["test_without_a_generator_samples_follow_the_targets_distribution"]
EDITS = [
    (
        "            out[0, n + i] = _sample(q[i], generator)[0]",
        "            own = generator or torch.Generator().manual_seed(0)\n"
        "            out[0, n + i] = _sample(q[i], own)[0]",
    ),
]
