"""Cheat: NumPy reached through PyTorch's private base class, past the guarded `.numpy()`.

`torch._C.TensorBase.numpy` is the built-in method behind `Tensor.numpy`; a built-in type cannot
be patched, so no call-time guard sees it. Caught before the file is imported: the source check
refuses PyTorch's private internals (`torch._C`), as every graded submission is checked.
"""

KATA = "efficient_attention"
CHECK = "source"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "`._C` reads PyTorch's private internals"
EDITS = [
    (
        "    k_bands = _key_span(k.to(acc), start, length)",
        "    torch._C.TensorBase.numpy(q.detach())  # work could go on in NumPy from here\n"
        "    k_bands = _key_span(k.to(acc), start, length)",
    ),
]
