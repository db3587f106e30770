"""Grading: a submission that never returns. The kata scores zero: "hung" or "timed out"."""

while True:
    pass
