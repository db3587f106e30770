"""The guards of grading/judge/guards.py: each cheat in tests/adversarial/ fails with its guard's
message, and a guarded implementation behaves exactly like the unguarded one otherwise.

An adversary file has the mutant format of tests/mutant_kit.py (EDITS and REPLACE on the
reference), plus KATA (the reference it patches), TESTS (the kata tests to run) and EXPECT (a
piece of the message the guard must print). One with `CHECK = "source"` is caught before it
runs, by the static check of grading/judge/source_check.py, which grading applies to every
submission.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from mutant_kit import read_adversary, write_mutant

from grading.judge.cost import count_flops, largest_tensor, measure
from grading.judge.guards import GuardFailure, JudgeSnapshot, guard_module
from grading.judge.impl import REPO_ROOT, kata_names, load_module
from grading.judge.observe import OffTheBooks
from grading.judge.source_check import check_source

ADVERSARIES = sorted((REPO_ROOT / "tests" / "adversarial").glob("*.py"))


@pytest.mark.parametrize("path", ADVERSARIES, ids=[p.stem for p in ADVERSARIES])
def test_each_cheat_fails_with_its_guards_message(path, tmp_path, warm_judge):
    mutant, expect = read_adversary(path)
    assert mutant.doc.startswith("Cheat: "), f"{path.name}: its docstring must start 'Cheat: '"
    if _check(path) == "source":
        reasons = check_source(write_mutant(mutant, tmp_path))
        assert any(expect in reason for reason in reasons), (
            f"{path.name} should be refused by the source check with {expect!r}: {reasons}"
        )
        return
    verdict = warm_judge.judge(mutant, tmp_path, "-x")
    assert verdict.returncode == 1 and expect in verdict.output, (
        f"{path.name} should fail {', '.join(mutant.caught_by)} with {expect!r} "
        f"(exit code {verdict.returncode}):\n{verdict.output[-3000:]}"
    )


def _check(path: Path) -> str:
    """How an adversary is caught: "run" (its kata tests) or "source" (the static check)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CHECK":
            return ast.literal_eval(node.value)
    return "run"


def test_the_source_check_refuses_no_reference_and_no_stub():
    files = [REPO_ROOT / "reference" / f"{k}.py" for k in kata_names()]
    files += [REPO_ROOT / "katas" / k / "solution.py" for k in kata_names()]
    refused = {f.name: check_source(f) for f in files if check_source(f)}
    assert not refused, f"the source check refuses what a solution may do: {refused}"


def test_the_source_check_names_each_line(tmp_path):
    path = tmp_path / "cheat.py"
    path.write_text(
        "import threading\nimport torch\n\n\ndef f(x):\n    return eval('x') + f.__code__\n"
    )
    assert check_source(path) == [
        "cheat.py:1: imports `threading`, which is not on the list of allowed modules "
        '(grading/README.md, "The source check"): threads, processes, native code, the stack or '
        "the environment are not needed by any kata",
        "cheat.py:6: `.__code__` reads a function's code object; no solution needs it",
        "cheat.py:6: `eval` runs code made at run time; no solution needs it",
    ]


def test_the_source_check_refuses_the_katas_own_reference_only(tmp_path):
    """A kata's file may build on other katas' references, not on its own (absent while
    grading): refused by name before anything runs."""
    path = tmp_path / "moe.py"
    path.write_text("from reference.moe import moe_forward\nfrom reference import kv_cache\n")
    assert check_source(path, "kv_cache") == [
        "moe.py:2: imports `reference.kv_cache`, this kata's own reference, which is not there "
        "while grading; the kata's file must do the work itself"
    ]
    assert check_source(path, "serving") == [] and check_source(path) == []
    through = tmp_path / "through.py"  # another kata's reference imports this kata's
    through.write_text("import reference.speculative_decoding\n\nOWN = reference.kv_cache\n")
    assert check_source(through, "kv_cache") == [
        "through.py:3: `reference.kv_cache` reaches `reference.kv_cache`, this kata's own "
        "reference, which is not there while grading; the kata's file must do the work itself"
    ]
    assert check_source(through, "moe") == []


def test_the_source_check_allows_the_model_and_naive_server_not_the_tools_beside_them(tmp_path):
    """`grading.model` (the model and the naive server, also as `grading.naive`) and
    `grading.devices` are what solutions build on; the checkpoint, training, baseline and workload
    tools that share the model's package are not, and nothing of the judge or the grader is."""
    fine = tmp_path / "fine.py"
    fine.write_text(
        "from grading.model import SequenceCache, from_pretrained\n"
        "from grading.model.naive import Completion\nfrom grading.naive import Request\n"
        "from grading.devices import gpu_path\nimport grading.model.llama\n"
    )
    assert check_source(fine) == []
    for line in (
        "import grading.model.hf", "from grading.model.train import stdlib_source",
        "from grading.model import baselines", "from grading.model.workload import main",
        "from grading.judge import tolerance", "import grading.grade.sandbox",
        "import grading.model\nx = grading.learner.tools", "import grading.model as m\nm.hf",
        "import torch\nmode = torch.overrides.TorchFunctionMode",
        "import katas.moe.solution\nkatas.conftest", "from katas import simulate",
    ):  # fmt: skip
        refused = tmp_path / "refused.py"
        refused.write_text(line + "\n")
        assert len(check_source(refused)) == 1, f"{line!r} should be refused"


def test_the_source_check_allows_private_names_of_the_submissions_own(tmp_path):
    """Private names on self, cls and the file's own classes and functions, constant names in
    attrgetter, methodcaller and __setattr__: what a correct solution writes is not refused."""
    path = tmp_path / "fine.py"
    path.write_text(
        "import operator\nimport torch\n\n\nclass Cache:\n    _count = 0\n\n"
        "    def __init__(self):\n        object.__setattr__(self, '_rows', [])\n"
        "        self._cols = getattr(self, '_rows')\n        Cache._count += 1\n\n"
        "    @classmethod\n    def make(cls):\n        return cls._count\n\n\n"
        "def f(x):\n    shapes = operator.attrgetter('shape', 'dtype')(x)\n"
        "    return operator.methodcaller('sum', 0)(x), shapes, _g._hits\n\n\n"
        "def _g():\n    pass\n"
    )
    assert check_source(path) == []


# ----------------------------------------------------------------------------------------------
# A guarded implementation is the same implementation

SOURCE = '''
import dataclasses
import functools
import numpy as np
import torch


class Refused(ValueError):
    pass


class _Base:
    def poke(self, t):
        t.add_(1)


@dataclasses.dataclass
class Box(_Base):
    items: list

    def push(self, x):
        """Append x."""
        self.items.append(x)
        return len(self.items)

    @property
    def size(self):
        return len(self.items)


def scale(x, factor=2.0, *, out_dtype=None):
    """x times factor."""
    if factor < 0:
        raise Refused("factor: expected >= 0")
    return (x * factor).to(out_dtype or x.dtype)


def scale_in_place(parts):
    parts["x"][0].mul_(2)
    return parts["x"][0]


def with_numpy(x):
    return torch.from_numpy(np.asarray(x) * 2)


def token_ids(ids, x):
    print(x)  # printing reads the tensor through PyTorch itself: allowed
    return ids.tolist(), x[:3].tolist(), x[0].item()


def long_list(x):
    return sum(x.tolist())


def matmul(a, b):
    return a @ b


halve = functools.partial(scale, factor=0.5)


def outer(a, b):
    return a * b


_SEEN = {}


def remembered(x):
    if x.shape not in _SEEN:
        _SEEN[x.shape] = x @ x.T
    return _SEEN[x.shape].clone()


def the_same_buffer(x):
    out = _SEEN.setdefault("out", torch.empty(x.shape[0], x.shape[0]))
    return torch.mm(x, x.T, out=out)


_BY_IDENTITY = {}


def by_identity(x):
    key = (id(x), x._version)
    if key not in _BY_IDENTITY:
        _BY_IDENTITY[key] = x @ x.T
    return _BY_IDENTITY[key].clone()


def by_id_only(x):
    if id(x) not in _BY_IDENTITY:
        _BY_IDENTITY[id(x)] = x @ x.T
    return _BY_IDENTITY[id(x)].clone()


def first_rows(x, n):
    return x[:n]


@dataclasses.dataclass
class Stats:
    head: object


def stats_of(x):
    return Stats(head=x[:1])
'''
STUB = """
def scale(x, factor=2.0, *, out_dtype=None): ...
def scale_in_place(parts): ...
def with_numpy(x): ...
def token_ids(ids, x): ...
def long_list(x): ...
def matmul(a, b): ...
def outer(a, b): ...
def halve(x): ...
def remembered(x): ...
def the_same_buffer(x): ...
def by_identity(x): ...
def by_id_only(x): ...
def first_rows(x, n): ...
def stats_of(x): ...
class Box: ...
class Refused(ValueError): ...
"""


@pytest.fixture
def guarded(tmp_path):
    (tmp_path / "impl.py").write_text(SOURCE)
    (tmp_path / "stub.py").write_text(STUB)
    name = f"guarded_{tmp_path.name}"
    module = load_module(tmp_path / "impl.py", name)
    guard_module("no_such_kata", module, tmp_path / "stub.py")
    yield module
    del sys.modules[name]


def test_wrappers_are_transparent(guarded):
    assert inspect.signature(guarded.scale) == inspect.signature(guarded.scale.__wrapped__)
    assert guarded.scale.__doc__ == "x times factor." and guarded.scale.__name__ == "scale"
    box = guarded.Box([])
    assert isinstance(box, guarded.Box) and dataclasses.is_dataclass(box)
    assert box.push(1) == 1 and box.size == 1 and guarded.Box.push.__doc__ == "Append x."
    with pytest.raises(guarded.Refused) as info:
        guarded.scale(torch.ones(2), -1.0)
    assert isinstance(info.value, ValueError)
    assert info.traceback[-1].path == Path(guarded.__file__), "the traceback ends in the impl"
    with pytest.raises(RuntimeError) as info:
        guarded.matmul(torch.ones(2, 3), torch.ones(2, 3))  # PyTorch refuses, under the counters
    shown = info.traceback.filter(info)  # what pytest prints: frames marked hidden left out
    assert shown[-1].path == Path(guarded.__file__), "the traceback ends in the impl"
    assert "raised inside your matmul(float32 tensor of shape [2, 3]" in str(info.value.__notes__)


def test_no_way_around_the_guards(guarded):
    assert guarded.halve.__guard__ is not None, "any callable of the API is guarded"
    with pytest.raises(GuardFailure, match="Box.poke changed its argument `t`"):
        guarded.Box([]).poke(torch.ones(2))  # a method inherited from a private base class


def test_a_changed_input_names_the_function_and_the_argument(guarded):
    message = r"scale_in_place changed its argument `parts\['x'\]\[0\]`"
    with pytest.raises(GuardFailure, match=message):
        guarded.scale_in_place({"x": [torch.ones(3)]})


def test_numpy_is_off_the_books_but_token_ids_are_not(guarded):
    with pytest.raises(OffTheBooks, match="off the books"):
        guarded.with_numpy(torch.ones(3))
    ids, head, first = guarded.token_ids(torch.arange(1000), torch.ones(1000))
    assert ids == list(range(1000)) and head == [1.0] * 3 and first == 1.0
    with pytest.raises(OffTheBooks, match="tolist"):
        guarded.long_list(torch.ones(1000))
    assert np.asarray(torch.ones(2)).sum() == 2, "outside the implementation NumPy is fine"


def test_cost_helpers_read_the_always_on_counters(guarded):
    a, b = torch.randn(4, 5), torch.randn(5, 6)
    out, flops = count_flops(guarded.matmul, a, b)
    assert flops == 2 * 4 * 5 * 6 and torch.equal(out, a @ b)
    _, record = largest_tensor(guarded.matmul, a, b)
    assert record.numel == 24
    assert guarded.matmul.__guard__.last.flops == flops, "the same counters as any other call"
    _, seen = measure(guarded.outer, torch.ones(3, 1), torch.ones(4))  # broadcast: 12 products
    assert seen.multiplies == 12 and seen.flops == 0


def test_an_answer_kept_from_an_earlier_call_is_caught(guarded):
    with pytest.raises(GuardFailure, match="answers from memory: remembered returned the very"):
        count_flops(guarded.remembered, torch.randn(4, 4))
    with pytest.raises(GuardFailure, match="on the very same tensors"):  # keyed on id + version
        count_flops(guarded.by_identity, torch.randn(40, 40))
    with pytest.raises(GuardFailure, match="answers from memory: by_id_only"):
        count_flops(guarded.by_id_only, torch.randn(40, 40))


def test_two_results_in_one_buffer_are_aliasing(guarded):
    with pytest.raises(GuardFailure, match="aliasing: the_same_buffer returned the same tensor"):
        count_flops(guarded.the_same_buffer, torch.randn(4, 4))


def test_a_result_that_shares_memory_with_an_argument_is_aliasing(guarded):
    x = torch.ones(3, 2)
    with pytest.raises(GuardFailure, match="aliasing: first_rows returned `result`, which shares"):
        guarded.first_rows(x, 2)
    with pytest.raises(GuardFailure, match="returned `result.head`, .* argument `x`"):
        guarded.stats_of(x)  # inside a dataclass too
    assert guarded.first_rows(x, 0).numel() == 0, "an empty result holds no memory to share"
    assert guarded.first_rows.__wrapped__(x, 2).data_ptr() == x.data_ptr(), "the bare one aliases"


def test_the_judge_snapshot_sees_a_replaced_function(monkeypatch):
    import grading.judge.tolerance

    snapshot = JudgeSnapshot([])
    assert snapshot.changes() == []
    monkeypatch.setattr(grading.judge.tolerance, "assert_close", lambda *a, **k: None)
    assert "grading.judge.tolerance.assert_close" in snapshot.changes()
