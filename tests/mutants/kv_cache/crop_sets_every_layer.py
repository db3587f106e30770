"""Bug: crop sets every layer's length to `length`, also a layer that holds fewer tokens.

Within one step the layers are updated one after another; a crop in between (a rollback after
the first layers of a step) then lengthens the layers not yet updated, over slots never written.
"""

CAUGHT_BY = ["test_crop_between_the_layers_updates_never_lengthens_a_layer"]
EDITS = [
    (
        "self.lengths = [min(n, length) for n in self.lengths]",
        "self.lengths = [length for _ in self.lengths]",
    ),
]
