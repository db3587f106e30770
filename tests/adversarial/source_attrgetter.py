"""Cheat: PyTorch's private switch that turns every dispatch mode off, reached by a string.

`operator.attrgetter("_C._DisableTorchDispatch")(torch)` never writes `torch._C` as an attribute,
yet inside `with` it every operation is invisible to the cost counters and the forbidden-call
rules. Caught before the file is imported: names given to `attrgetter` and `methodcaller` must be
constants that pass the same rules as an attribute written out.
"""

KATA = "efficient_attention"
CHECK = "source"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "`attrgetter('_C._DisableTorchDispatch')`: `._C` reads PyTorch's private internals"
EDITS = [
    ("import math\n", "import math\nimport operator\n"),
    (
        "    k_bands = _key_span(k.to(acc), start, length)",
        '    with operator.attrgetter("_C._DisableTorchDispatch")(torch)():\n'
        "        k_full = k.to(acc) * 1  # uncounted work\n"
        "    k_bands = _key_span(k.to(acc), start, length)",
    ),
]
