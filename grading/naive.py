"""`from grading.naive import Completion, Request, naive_serve`: the import path solutions written
before the naive server moved to `grading/model/naive.py` use; it stays allowed and working."""

from grading.model.naive import Completion, Request, naive_serve

__all__ = ["Completion", "Request", "naive_serve"]
