"""Bug: an empty list of requests returns [] before batch_size is checked.

A shortcut at the top (`if not requests: return []`) serves the empty workload, but
static_batching(model, [], 0) then returns [] where the README asks for a ValueError naming
batch_size: the arguments are checked whatever the requests are.
"""

CAUGHT_BY = ["test_static_bad_input_raises_value_error"]
EDITS = [
    (
        '    _check_size("batch_size", batch_size)\n    queue = _sequences(model, requests)\n',
        '    if not requests:\n        return []\n    _check_size("batch_size", batch_size)\n'
        "    queue = _sequences(model, requests)\n",
    ),
]
