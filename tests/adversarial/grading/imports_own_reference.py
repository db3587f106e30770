"""Grading: a submission that imports its own kata's reference by name, which the grader's copy
of the repository does not hold. The kata scores zero: "does not import", said once."""

from reference.context_extension import *  # noqa: F403
