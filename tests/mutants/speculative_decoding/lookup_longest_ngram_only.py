"""Bug: prompt lookup tries only n = max_ngram and gives up when it is not found.

Long n-grams are the safest matches, but they are rare: without falling back to shorter ones,
most rounds propose nothing.
"""

CAUGHT_BY = ["test_lookup_draft_known_cases"]
EDITS = [
    (
        "for n in range(min(max_ngram, L - 1), 0, -1):",
        "for n in range(min(max_ngram, L - 1), min(max_ngram, L - 1) - 1, -1):",
    ),
]
