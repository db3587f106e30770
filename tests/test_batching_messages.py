"""The batching kata's failure messages name the real mistake: each mutant below, run on the
workload that exposes it, fails with a message about the rule it broke, not a symptom."""

from __future__ import annotations

import pytest
from mutant_kit import read_mutant, write_mutant

from grading.judge.impl import REPO_ROOT, load_module
from grading.model.workload import WorkloadRequest
from katas.batching.cases import (
    LISTED_OUT_OF_ORDER,
    Limits,
    as_requests,
    check_fixed_batches,
    check_oldest_admitted_first,
    read_trace,
    serve,
    shared_model,
    static_plan,
)
from katas.batching.test_batching_4_memory import PREEMPTING, run_and_check_all

# A one-token prompt and a six-token one admitted together under a budget of 2: from step 1 on
# the first decodes while the second's prompt comes in chunks, and the budget binds.
BINDING = (
    [WorkloadRequest(0, [1], 6, 0), WorkloadRequest(1, [2, 9, 9, 9, 9, 9], 3, 0)],
    Limits(2, 2),
)


def mutant(name: str, tmp_path):
    path = write_mutant(read_mutant(REPO_ROOT / "tests" / "mutants" / "batching" / f"{name}.py"),
                        tmp_path)  # fmt: skip
    return load_module(path, f"batching_mutant_{name}_{tmp_path.name}")


@pytest.mark.parametrize(
    "name, says",
    [
        ("preemption_restarts_from_scratch", "keeps its tokens and its first_token across a "
         "preemption; when it rejoins it feeds its prompt and every token it had generated"),
        ("preemption_forgets_generated_tokens", "keeps its tokens and its first_token across a "
         "preemption; when it rejoins it feeds its prompt and every token it had generated"),
        ("first_token_reset_on_preemption", "keeps its tokens and its first_token across a "
         "preemption: the recompute feeds them again but produces no first token"),
    ],
)  # fmt: skip
def test_a_preemption_that_loses_progress_is_named(name, says, tmp_path):
    impl = mutant(name, tmp_path)
    with pytest.raises(AssertionError) as failure:
        run_and_check_all(impl, *PREEMPTING)
    assert says in str(failure.value), str(failure.value)
    assert "the clock skips" not in str(failure.value), str(failure.value)


def test_a_static_group_started_early_names_the_first_request_served_before_arrival(tmp_path):
    """Groups {6, 7} and {5}: started at 6's arrival, the first call serves 7 a step early."""
    impl = mutant("static_starts_with_first_member", tmp_path)
    specs = LISTED_OUT_OF_ORDER
    out, log = serve(impl.static_batching, shared_model(), as_requests(impl, specs), 2)
    with pytest.raises(AssertionError) as failure:
        check_fixed_batches(read_trace(log, specs), out, static_plan(specs, 2), rule="static")
    assert str(failure.value).startswith(
        "request 7 reports first_token = 0, before its arrival at step 1"
    ), str(failure.value)


def test_a_budget_given_to_the_newest_first_is_named(tmp_path):
    impl = mutant("budget_to_the_newest_admitted_first", tmp_path)
    specs, limits = BINDING
    with pytest.raises(AssertionError) as failure:
        trace, steps = run_and_check_all(impl, specs, limits)
        check_oldest_admitted_first(trace, steps, limits)
    assert "the budget goes to the running requests oldest admitted first" in str(failure.value), (
        str(failure.value)
    )
