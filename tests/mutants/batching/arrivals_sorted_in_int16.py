"""Bug: the arrival steps are sorted as an int16 tensor, which holds only up to 32767.

Sorting with torch.argsort on a small integer dtype works for every test clock of a few dozen
steps; a request arriving at step 32768 or later wraps to a negative arrival, is sorted to the
front of the queue, and holds up everybody who arrived before it.
"""

CAUGHT_BY = ["test_every_strategy_serves_arrivals_far_into_the_clock"]
EDITS = [
    (
        "    return sorted((_Sequence(r, i) for i, r in enumerate(requests)), key=lambda s: s.key)",
        "    arrivals = torch.tensor([r.arrival for r in requests], dtype=torch.int16)\n"
        "    order = torch.argsort(arrivals, stable=True).tolist()\n"
        "    return [_Sequence(requests[i], i) for i in order]",
    ),
]
