"""Cheat: PyTorch's private helper that pops every dispatch mode for the block.

`torch.utils._python_dispatch._disable_current_modes()` is reached as an attribute of a public
module, with no import of the private module for the import list to refuse; work inside it is
invisible to the cost counters. Caught before the file is imported: a private name (`_x`) may
only be read on `self`, `cls` and the submission's own classes and functions.
"""

KATA = "efficient_attention"
CHECK = "source"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "`._python_dispatch` reads a private attribute of something the submission did not define"
EDITS = [
    (
        "    k_bands = _key_span(k.to(acc), start, length)",
        "    with torch.utils._python_dispatch._disable_current_modes():\n"
        "        k_full = k.to(acc) * 1  # uncounted work\n"
        "    k_bands = _key_span(k.to(acc), start, length)",
    ),
]
