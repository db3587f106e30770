"""The judge cannot be changed.

`JudgeSnapshot` records what judges (the `grading` modules, the test modules, the PyTorch
functions the oracles and counters use, the counters' operator table, Hypothesis's settings)
before the implementation is imported; after each guarded call (`grading.judge.guards`) and each
test (`grading.judge.plugin`) `changes()` lists whatever was replaced since: an attribute, or a
function's code, defaults or closure. `judge_changed` words the failure.
"""

from __future__ import annotations

import inspect
import operator
import sys
from types import ModuleType
from typing import Any

import torch
from hypothesis import settings

from grading.judge import observe
from grading.judge.observe import observing


def judge_changed(changed: list[str], when: str) -> str:
    """The message for a judge changed by the implementation."""
    more = " ..." if len(changed) > 5 else ""
    return (
        f"the judge was changed {when}: the implementation replaced {', '.join(changed[:5])}"
        f"{more}. A solution may not patch the test harness (grading), the tests, Hypothesis's "
        "settings or the PyTorch functions they use"
    )


_TORCH_JUDGES = (
    "torch",
    "torch.nn.functional",
    "torch.linalg",
    "torch.special",
    "torch.testing",
    "torch.utils.flop_counter",
    "torch.utils._python_dispatch",
    "torch.utils._pytree",
    "math",
    "pytest",
    "hypothesis",
)


def _judge_modules(extra: list[ModuleType]) -> list[ModuleType]:
    names = [
        name
        for name in list(sys.modules)
        if name == "grading" or name.startswith(("grading.", "katas.")) or name in _TORCH_JUDGES
    ]
    return [sys.modules[n] for n in names if sys.modules.get(n) is not None] + extra


_MISSING = object()
_CODE = operator.attrgetter("__code__")
_DEFAULTS = operator.attrgetter("__defaults__")
_CONTENTS = operator.attrgetter("cell_contents")


def _functions(value: Any) -> list:
    """The Python functions behind a namespace entry: a function, a static or class method's,
    a property's accessors."""
    if inspect.isfunction(value):
        return [value]
    if isinstance(value, (staticmethod, classmethod)) and inspect.isfunction(value.__func__):
        return [value.__func__]
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if inspect.isfunction(f)]
    return []


# What the judge's own machinery changes while it works: Hypothesis's example database, opened
# lazily, and PyTorch's module-level flags (`_is_in_torch_dispatch_mode`, ...) that say a dispatch
# mode, a counter of the judge's, is active. No judging module has a flag of its own.
_VOLATILE = frozenset({"_cached_database"})


def _volatile(key: str, before: Any) -> bool:
    return key in _VOLATILE or isinstance(before, bool)


class JudgeSnapshot:
    """Every attribute of the judging modules (and of the classes they define), by identity; the
    code, defaults and closures of every function among them; the counters' operator table; and
    Hypothesis's active settings.

    `changes()` runs after every guarded call, so each part is first compared whole, at C speed
    (a dict or list compares its items by identity first); only a difference is looked into."""

    def __init__(self, test_modules: list[ModuleType]) -> None:
        with observing():  # entering the counters once makes PyTorch finish its lazy imports
            torch.zeros(1).sum()
        self.seen: list[tuple[str, Any, dict, bool]] = []  # (where, namespace, copy, is a class)
        for module in _judge_modules(test_modules):
            self._record(module.__name__, vars(module), False)
            if module.__name__ in _TORCH_JUDGES:
                continue  # their classes (torch.FloatTensor, ...) judge nothing
            for attr, value in list(vars(module).items()):
                if isinstance(value, type) and value.__module__ == module.__name__:
                    self._record(f"{module.__name__}.{attr}", vars(value), True)
                elif isinstance(value, dict) and value is not observe._INFO:  # _INFO: below
                    self._record(f"{module.__name__}.{attr}", value, False)
        self._record("torch.Tensor", vars(torch.Tensor), True)
        self._record("torch._C.TensorBase", vars(torch._C.TensorBase), True)
        self.settings = settings.default
        self._record("hypothesis.settings", vars(settings), True)
        self._record("hypothesis.settings.default", vars(self.settings), True)
        self._record("hypothesis profiles", settings._profiles, False)
        self.functions = [
            (f"{where}.{key}", f)
            for where, _, copy, _ in self.seen
            for key, value in copy.items()
            for f in _functions(value)
        ]
        self.fns = [f for _, f in self.functions]
        self.codes, self.defaults = list(map(_CODE, self.fns)), list(map(_DEFAULTS, self.fns))
        self.cells = [
            (name, cell)
            for name, f in self.functions
            for cell in f.__closure__ or ()
            if _filled(cell)
        ]
        self.cell_objects = [cell for _, cell in self.cells]
        self.contents = [cell.cell_contents for _, cell in self.cells]
        self.kwdefaults = [
            (name, f.__kwdefaults__) for name, f in self.functions if f.__kwdefaults__
        ]
        self.kwdefault_dicts = [d for _, d in self.kwdefaults]
        self.kwdefaults_saved = [dict(d) for _, d in self.kwdefaults]
        self.operators = len(observe._INFO)
        self.operator_entries = list(observe._INFO.items())

    def _record(self, where: str, namespace, is_class: bool) -> None:
        if all(ns is not namespace for _, ns, _, _ in self.seen):  # __builtins__ is everywhere
            self.seen.append((where, namespace, dict(namespace), is_class))

    def changes(self) -> list[str]:
        """What was replaced or removed since the snapshot: `module.attribute` names (a class's
        added attributes too), functions whose code, defaults or closure changed, and the
        counters' or Hypothesis's tables."""
        changed = []
        namespaces = [namespace for _, namespace, _, _ in self.seen]
        if not _equal(namespaces, [copy for _, _, copy, _ in self.seen]):  # all in one go
            for i, (where, namespace, copy, is_class) in enumerate(self.seen):
                if _equal(namespace, copy):
                    continue
                found = [
                    f"{where}.{key}" + (" (removed)" if key not in namespace else "")
                    for key, before in copy.items()
                    if namespace.get(key, _MISSING) is not before and not _volatile(key, before)
                ]
                if is_class:
                    found += [f"{where}.{key} (added)" for key in namespace if key not in copy]
                if not found:  # a module's lazy import added a name: compare the whole again
                    self.seen[i] = (where, namespace, dict(namespace), is_class)
                changed += found
        if (
            list(map(_CODE, self.fns)) != self.codes
            or list(map(_DEFAULTS, self.fns)) != self.defaults
        ):
            for (name, f), code, defaults in zip(
                self.functions, self.codes, self.defaults, strict=True
            ):
                if f.__code__ is not code:
                    changed.append(f"{name}.__code__")
                if f.__defaults__ is not defaults:
                    changed.append(f"{name}.__defaults__")
        if not _equal(self.cell_objects, self.contents, _CONTENTS):
            changed += [
                f"{name} (a variable of its closure)"
                for (name, cell), before in zip(self.cells, self.contents, strict=True)
                if not _filled(cell) or cell.cell_contents is not before
            ]
        if not _equal(self.kwdefault_dicts, self.kwdefaults_saved):
            changed += [
                f"{name}.__kwdefaults__"
                for (name, now), before in zip(self.kwdefaults, self.kwdefaults_saved, strict=True)
                if now.keys() != before.keys() or any(now[k] is not v for k, v in before.items())
            ]
        if settings.default is not self.settings:
            changed.append("hypothesis.settings.default")
        changed += self._operator_table()
        return changed

    def _operator_table(self) -> list[str]:
        """The counters' table of operators: old entries unchanged, new ones what the counters
        themselves would have written (each checked once)."""
        table = observe._INFO
        if len(table) < self.operators or not all(
            table.get(key) is info for key, info in self.operator_entries
        ):
            return ["grading.judge.observe._INFO (the counters' table of operators)"]
        for key, info in list(table.items())[self.operators :]:
            if key != id(info.op) or info != observe.operator_info(info.op):
                return [f"grading.judge.observe._INFO (the entry of {info.name})"]
            self.operator_entries.append((key, info))
        self.operators = len(table)
        return []


def _equal(now, before, read=None) -> bool:
    """`now == before` at C speed (identical items are equal without being compared); False
    when an item's own comparison fails or is not a plain bool (a tensor's)."""
    try:
        if read is not None:
            now = list(map(read, now))
        return bool(now == before)
    except Exception:  # noqa: BLE001 - an empty cell, a tensor compared elementwise
        return False


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True
