"""Bug: the checks of k, max_new_tokens and max_ngram raise ValueError("bad input").

The error comes where it should, but the message does not say which of the three numbers was
wrong: the README promises a message that names the argument.
"""

CAUGHT_BY = ["test_greedy_bad_input_raises_value_error"]
EDITS = [
    (
        'raise ValueError(f"{name}: expected an int >= {least}, got {value!r}")',
        'raise ValueError("bad input")',
    ),
]
