"""Cheat: generate swaps the caller's prompt for a contiguous copy with `.data = ...`.

The values are the same and no operator writes into the caller's memory, so a comparison of
values and a watch on writes both see nothing; but the caller's tensor now points at other
memory (a view of a larger buffer is cut off from it). Caught because the guard also compares
each tensor argument's memory, offset, strides and autograd state before and after the call.
"""

KATA = "kv_cache"
TESTS = ["test_generate_matches_the_uncached_generator"]
EXPECT = "changed its argument `prompt_ids` in place: its values are the same, but not its memory"
EDITS = [
    (
        "    B, T = prompt_ids.shape\n",
        "    B, T = prompt_ids.shape\n    prompt_ids.data = prompt_ids.data.clone()\n",
    ),
]
