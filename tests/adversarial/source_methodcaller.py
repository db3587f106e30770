"""Cheat: tensor data handed to NumPy through a method named in a string made at run time.

`operator.methodcaller("num" + "py")(q)` writes no `.numpy` for the source check to read. Caught
before the file is imported: `methodcaller` and `attrgetter` take only constant names.
"""

KATA = "efficient_attention"
CHECK = "source"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "`methodcaller` reads attributes by a name made at run time"
EDITS = [
    ("import math\n", "import math\nimport operator\n"),
    (
        "    k_bands = _key_span(k.to(acc), start, length)",
        '    operator.methodcaller("num" + "py")(q.detach())  # work could go on in NumPy\n'
        "    k_bands = _key_span(k.to(acc), start, length)",
    ),
]
