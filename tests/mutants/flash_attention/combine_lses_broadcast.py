"""Bug: combine_partials accepts any lses that broadcasts against outs, such as (S, 1, 1, 1).

Checking only that the shapes combine lets PyTorch's broadcasting decide: one lse per part, or
lses without the part dim, silently weigh every query of a part alike (or every part alike)
instead of being refused with a ValueError that names lses.
"""

CAUGHT_BY = ["test_combine_partials_refuses_bad_inputs"]
EDITS = [
    (
        """    if outs.dim() != 5 or lses.shape != outs.shape[:4]:
        raise ValueError(""",
        """    if outs.dim() != 5 or lses.dim() > 4:
        raise ValueError(""",
    ),
    (
        """    if outs.shape[0] == 0:
        raise ValueError(f"outs must hold at least one part, got shape {tuple(outs.shape)}")
""",
        """    if outs.shape[0] == 0:
        raise ValueError(f"outs must hold at least one part, got shape {tuple(outs.shape)}")
    try:
        torch.broadcast_shapes(lses.shape, outs.shape[:4])
    except RuntimeError:
        shapes = f"lses {tuple(lses.shape)}, outs {tuple(outs.shape)}"
        raise ValueError(f"lses does not fit outs: {shapes}") from None
""",
    ),
]
