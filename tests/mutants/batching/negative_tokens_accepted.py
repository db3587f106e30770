"""Bug: the prompt check tests only the upper end of the vocabulary, so a token of -1 passes.

PyTorch's embedding then fails with an IndexError deep inside the model (or, with another
model, wraps around to the last row): the README asks for a ValueError naming the prompt.
"""

CAUGHT_BY = ["test_static_bad_input_raises_value_error"]
EDITS = [
    (
        "type(t) is int and 0 <= t < config.vocab_size",
        "type(t) is int and t < config.vocab_size",
    ),
]
