"""Bug: a prompt token is accepted when it can serve as an index, so tensors pass.

`hasattr(t, "__index__")` (or `operator.index`) refuses floats and looks like a generous int
check, but a 0-d integer tensor has `__index__` too, and a prompt given as a tensor is made of
them: the README asks for Python ints and refuses both.
"""

CAUGHT_BY = [
    "test_static_bad_input_raises_value_error",
    "test_dynamic_bad_input_raises_value_error",
    "test_continuous_bad_input_raises_value_error",
]
EDITS = [
    (
        "type(t) is int and 0 <= t < config.vocab_size",
        'hasattr(t, "__index__") and not isinstance(t, bool) and 0 <= t < config.vocab_size',
    ),
]
