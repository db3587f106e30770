"""Bug: update copies v as if it had k's memory layout.

Code that computes flat offsets once (as a kernel would) from k's strides and reuses them for v
is right whenever both are contiguous; when a model hands over k and v as different views, v's
numbers come back scrambled.
"""

CAUGHT_BY = ["test_update_accepts_any_layout"]
EDITS = [
    (
        "self.v[layer, :, :, start : start + T] = v\n",
        "self.v[layer, :, :, start : start + T] = v.as_strided(k.shape, k.stride())\n",
    ),
]
