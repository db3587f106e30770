"""Bug: one uniform number is drawn per round and compared with every proposal's p/q.

It vectorises neatly and each token is still accepted with probability min(1, p/q) on its own;
but the verdicts are now tied together (a small u accepts everything, a large one rejects
early), so whole runs of proposals are kept or dropped too often.
"""

CAUGHT_BY = ["test_accept_reject_output_has_the_exact_distribution"]
EDITS = [
    (
        "u = torch.rand(k, generator=generator, device=device, dtype=torch.float64)",
        "u = torch.rand(1, generator=generator, device=device, dtype=torch.float64).expand(k)",
    ),
]
