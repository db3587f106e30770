"""Cheat: `attrgetter` imported under another name, so that its calls are not recognised.

`from operator import attrgetter as read` then `read("_C")(torch)`. Caught before the file is
imported: `attrgetter` and `methodcaller` may only be imported under their own names.
"""

KATA = "efficient_attention"
CHECK = "source"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "imports `attrgetter` under another name"
EDITS = [
    ("import math\n", "import math\nfrom operator import attrgetter as read\n"),
    (
        "    k_bands = _key_span(k.to(acc), start, length)",
        '    read("_C")(torch)  # PyTorch\'s private internals, past every counter\n'
        "    k_bands = _key_span(k.to(acc), start, length)",
    ),
]
