"""Grading: a submission that asks for far more memory than the machine has.
The kata scores zero: "exhausted memory"."""

import torch

HOARD = torch.empty(2**37, dtype=torch.uint8)
