"""Bug: update concatenates the past with the new tokens on every step.

The values are right, but each step copies the whole past: the cost grows with the square of
the length and memory is reallocated all the time. It is the first version almost everyone writes.
"""

CAUGHT_BY = ["test_update_never_concatenates_the_past"]
EDITS = [
    (
        "return self.k[layer, :, :, : start + T], self.v[layer, :, :, : start + T]  # views",
        "past_k = self.k[layer, :, :, :start].clone()\n"
        "        past_v = self.v[layer, :, :, :start].clone()\n"
        "        return torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)",
    ),
]
