"""Bug: the cos/sin tables are laid out f0, f0, f1, f1 while apply_rope splits x in halves.

Mixing code from two codebases (an interleaved table builder, a half-split rotation) is a common
way to end up here; each half looks fine, together the two halves of a pair use different angles.
"""

CAUGHT_BY = ["test_rope_cos_sin_layout_known_values", "test_rope_scores_depend_only_on_distance"]
EDITS = [
    (
        "angles = torch.cat([angles, angles], dim=-1)",
        "angles = angles.repeat_interleave(2, dim=-1)",
    ),
]
