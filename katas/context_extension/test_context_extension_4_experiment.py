"""Level 4 of the context-extension kata: the experiment runs on your functions."""

from __future__ import annotations

from katas.context_extension.experiment import report


def test_experiment_prints_a_table_per_method(impl):
    text = report(impl, head_dim=8, trained=64, factor=4.0)
    for method in ("plain", "linear", "ntk", "dynamic", "yarn", "alibi"):
        assert method in text, f"the experiment's report should mention {method}:\n{text}"
