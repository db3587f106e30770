"""Grading: a submission that crashes the interpreter. The kata scores zero: "crashed"."""

import ctypes

ctypes.string_at(0)
