"""Bug: update returns what was cached before this call, without the tokens just written.

An off-by-one in the slice end: the newest query then cannot see its own key.
"""

CAUGHT_BY = ["test_update_returns_everything_appended", "test_cached_logits_agree_at_every_step"]
EDITS = [
    (
        "return self.k[layer, :, :, : start + T], self.v[layer, :, :, : start + T]  # views",
        "end = max(start, 1) if start + T > 1 else start + T\n"
        "        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]",
    ),
]
