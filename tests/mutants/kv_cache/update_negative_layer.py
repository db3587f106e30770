"""Bug: update lets Python's negative indexing through, so layer -1 means the last layer.

`self.k[layer]` accepts -1 without complaint; a caller's off-by-one then writes another layer's
cache instead of raising.
"""

CAUGHT_BY = ["test_bad_input_raises_value_error"]
EDITS = [
    ("or not 0 <= layer < n_layers:", "or not -n_layers <= layer < n_layers:"),
]
