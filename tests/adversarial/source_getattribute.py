"""Cheat: a private module reached by `__getattribute__`, which `getattr`'s rule does not name.

`torch.utils.__getattribute__("_python_dispatch")` is `getattr` under another spelling. Caught
before the file is imported: `__getattribute__` (and `__getattr__`, `__setattr__`,
`__delattr__`) take only constant names that pass the rules of an attribute written out.
"""

KATA = "efficient_attention"
CHECK = "source"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "`__getattribute__('_python_dispatch')`: `._python_dispatch` reads a private attribute"
EDITS = [
    (
        "    k_bands = _key_span(k.to(acc), start, length)",
        '    dispatch = torch.utils.__getattribute__("_python_dispatch")\n'
        '    with dispatch.__getattribute__("_disable_current_modes")():\n'
        "        k_full = k.to(acc) * 1  # uncounted work\n"
        "    k_bands = _key_span(k.to(acc), start, length)",
    ),
]
