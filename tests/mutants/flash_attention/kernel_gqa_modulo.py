"""Bug: query head h reads kv head h % Hkv instead of h // (H // Hkv).

Both map H heads onto Hkv heads and both are right when H == Hkv; the modulo interleaves the
groups, which is how some layouts repeat heads but not the convention here.
"""

CAUGHT_BY = ["test_flash_attention_matches_oracle"]
EDITS = [
    (
        "h_kv = h // group",
        "h_kv = h % (H // group)",
    ),
]
