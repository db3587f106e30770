"""Cheat: a merge of one part hands that part back instead of a new tensor.

With a single float32 part there is nothing to weigh, so `outs[0]` and `lses[0]` are already the
answer; but they are views of the caller's inputs, and whoever writes to the result writes into
the inputs too. Caught because a result that shares memory with an argument is aliasing.
"""

KATA = "flash_attention"
TESTS = ["test_combine_partials_runs_in_float32_for_any_input_dtype"]
EXPECT = "aliasing: combine_partials returned `result[0]`, which shares its memory"
EDITS = [
    (
        "    lses = lses.float()\n    # An empty part",
        "    if outs.shape[0] == 1:\n"
        "        return outs[0].float(), lses[0].float()\n"
        "    lses = lses.float()\n    # An empty part",
    ),
]
