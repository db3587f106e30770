"""Bug: a request's stop ids are never checked.

Only the prompt is validated, so a stop id outside the vocabulary (never generated, so the
request silently runs to max_new_tokens), a bool, a tensor or a bare int (a TypeError at the
first `in`) gets through: the README asks for a ValueError naming stop.
"""

CAUGHT_BY = ["test_stop_bad_input_raises_value_error"]
EDITS = [
    (
        "        if not isinstance(r.stop, (tuple, list)) or not all(\n"
        "            type(t) is int and t in range(config.vocab_size) for t in r.stop\n"
        "        ):\n",
        "        if False:\n",
    ),
]
