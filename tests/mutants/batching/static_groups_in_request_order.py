"""Bug: static groups are cut in the order of `requests`, not in arrival order.

The list usually comes sorted by arrival, so this works until it does not: a late request placed
early in the list holds up a whole group of earlier ones.
"""

CAUGHT_BY = ["test_static_groups_are_exactly_as_defined"]
EDITS = [
    (
        '    _check_size("batch_size", batch_size)\n    queue = _sequences(model, requests)',
        '    _check_size("batch_size", batch_size)\n'
        "    queue = sorted(_sequences(model, requests), key=lambda s: s.order)",
    ),
]
