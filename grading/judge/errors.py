"""The error contract: bad input gets a ValueError naming the argument, and a missing one is
reported as a sentence.

Kata tests list bad inputs as a table of `BadCall`s and check each with `assert_value_error`:

    BAD_CALLS = [
        BadCall("generate(model, prompt of shape [10], 2)", "no batch dimension",
                lambda impl, model: impl.generate(model, torch.zeros(10, dtype=torch.long), 2),
                names="prompt_ids"),
        ...
    ]

    @pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
    def test_bad_input_raises_value_error(impl, model, bad):
        assert_value_error(bad, impl, model)

Every README promises a ValueError whose message names the argument, as its `### Errors` section
names it; `names` (or `match=`) says which, as a regular expression of whole words ("p|q": either
one), so a message such as "bad input" fails.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class BadCall:
    call: str  # the call as a learner would write it, e.g. "crop(-1)"
    why: str  # what is wrong with it, e.g. "a negative length"
    run: Callable[..., Any]  # makes the call, given the test's arguments
    names: str = ""  # what the message must name, e.g. "length" ("p|q": either); or match=

    def __str__(self) -> str:
        return self.why.replace(" ", "-")


def assert_value_error(bad: BadCall, *args: Any, match: str | None = None) -> None:
    """Fail unless `bad.run(*args)` raises ValueError whose message names `match` (or
    `bad.names`) as a whole word."""
    __tracebackhide__ = True
    names = match or bad.names
    if not names:
        raise TypeError(f"BadCall {bad.call!r}: say which argument its message must name")
    try:
        bad.run(*args)
    except ValueError as exc:
        if not re.search(rf"\b(?:{names})\b", str(exc)):
            named = " or ".join(repr(name) for name in names.split("|"))
            pytest.fail(
                f"{bad.call} raised ValueError({str(exc)!r}), which does not say what is wrong: "
                f"its message must name the argument, {named} ({bad.why}), as the README's "
                "Errors section does",
                pytrace=False,
            )
        return
    except Exception as exc:  # noqa: BLE001 - any other exception is the learner's bug to see
        pytest.fail(
            f"{bad.call} should raise ValueError ({bad.why}), but raised "
            f"{type(exc).__name__}: {exc}",
            pytrace=False,
        )
    pytest.fail(f"{bad.call} should raise ValueError ({bad.why}), but returned", pytrace=False)


NON_FINITE = (math.nan, math.inf, -math.inf)


def non_finite_calls(call: str, name: str, run: Callable[..., Any]) -> list[BadCall]:
    """One BadCall per non-finite value (NaN, inf, -inf) of a float argument the README
    validates: `call` shows the call with "{}" where the value goes, `run(value, *test_args)`
    makes it. A check written `x < 0` lets NaN through (every comparison with NaN is false),
    and one written `x >= 0` lets inf through."""
    return [
        BadCall(call.format(value), f"{name} {value}", lambda *args, v=value: run(v, *args), name)
        for value in NON_FINITE
    ]
