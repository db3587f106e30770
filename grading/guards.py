"""Guards around every call the tests make into the implementation under test.

`guard_module(kata, module)` replaces, in place, each public function of the kata's API and each
public method of its classes with a wrapper that (on the outermost call only; the
implementation's calls into itself pass straight through):

- runs the call under the always-on counters of `grading.observe` and keeps what they saw in
  `guard.last` (the cost helpers of `grading.cost` read it);
- fails if the call changed a tensor it was given (also inside lists, tuples and dicts), naming
  the function and the argument;
- fails if the call ran an operator its kata forbids, or (for a kernel task) launched no Triton
  kernel (`grading.rules`);
- fails if the call ran the shared model with grad mode on (an autograd graph per token).

The wrappers are transparent: `functools.wraps` keeps names, docstrings and signatures, classes
stay the same classes (isinstance, dataclasses and exceptions behave as before), and exceptions
the implementation raises pass through unchanged, traceback included.

`JudgeSnapshot` records what judges (the `grading` modules, the test modules, the PyTorch
functions the oracles and counters use) before the implementation is imported; after each test
`changes()` lists whatever was replaced since.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from grading.devices import gpu_path
from grading.model import TinyLlama
from grading.observe import Observation, observing
from grading.rules import Rule, rules_for

# On a GPU, a function's first calls in each test are guarded, the rest run as they are: a
# benchmark calls it hundreds of times, and copying its inputs and counting its operators would
# be timed with it. A call is on a GPU when a tensor argument is, or the shared model given is
# (in a rehearsal of the GPU tests on the CPU, every call is: `gpu_path`). (Costs are counted on
# the CPU, where every call is guarded.)
GPU_CALLS = 16


class GuardFailure(AssertionError):
    """An implementation broke one of the rules every kata shares."""


def api_names(stub: Path) -> list[str]:
    """Public top-level functions and classes the kata's stub defines: the API tests call."""
    tree = ast.parse(stub.read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")
    ]


def _tensors(value: Any, name: str):
    """(name, tensor) for every tensor in `value`, looking inside lists, tuples and dicts."""
    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{name}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{name}[{key!r}]")


def _same(before: torch.Tensor, after: torch.Tensor) -> bool:
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    if torch.equal(before, after):
        return True
    return (
        bool(((before == after) | (before.isnan() & after.isnan())).all())
        if (before.is_floating_point() or before.is_complex())
        else False
    )


def _describe(args: tuple, kwargs: dict) -> str:
    def one(x: Any) -> str:
        if isinstance(x, torch.Tensor):
            return f"{x.dtype} tensor of shape {list(x.shape)}".replace("torch.", "")
        if isinstance(x, (int, float, bool, str, type(None), torch.dtype)):
            return repr(x)
        return type(x).__name__

    return ", ".join([one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()])


class Guard:
    """The guards of one loaded implementation (one per test module)."""

    def __init__(self, kata: str, rules: dict[str, Rule]) -> None:
        self.kata = kata
        self.rules = rules
        self.depth = 0  # > 0 while a guarded call runs: inner calls pass straight through
        self.last = Observation()  # what the latest outermost call did
        self.probed: dict[str, str | None] = {}  # each probe's verdict, run once per function
        self.calls: dict[str, int] = {}  # outermost calls per function in the current test

    def new_test(self) -> None:
        self.calls.clear()

    def wrap(self, fn, qualname: str, method: bool):
        guard = self
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a callable without one: arguments named by position
            signature = None

        @functools.wraps(fn)
        def guarded(*args, **kwargs):
            __tracebackhide__ = True
            if guard.depth:
                return fn(*args, **kwargs)
            return guard.call(fn, signature, qualname, method, args, kwargs)

        guarded.__guard__ = self
        guarded.__guarded_method__ = method
        return guarded

    def unobserved(self, fn, *args, **kwargs):
        """Call the implementation's own `fn` with no counter on at all (and no guard)."""
        __tracebackhide__ = True
        self.depth += 1
        try:
            return inspect.unwrap(fn)(*args, **kwargs)
        finally:
            self.depth -= 1

    def call(self, fn, signature, qualname: str, method: bool, args: tuple, kwargs: dict):
        __tracebackhide__ = True
        try:
            bound = signature.bind(*args, **kwargs).arguments
        except (TypeError, AttributeError):  # the call itself will say what is wrong
            bound = {f"argument {i}": a for i, a in enumerate(args)} | kwargs
        names = list(bound)[1:] if method else list(bound)
        tensors = [(label, t) for n in names for label, t in _tensors(bound[n], n)]
        self.calls[qualname] = self.calls.get(qualname, 0) + 1
        models = [m for m in (*args, *kwargs.values()) if isinstance(m, TinyLlama)]
        on_gpu = any(gpu_path(t) for _, t in tensors) or any(
            gpu_path(m.embed.weight) for m in models
        )
        if self.calls[qualname] > GPU_CALLS and on_gpu:
            return self.unobserved(fn, *args, **kwargs)  # a benchmark's hundredth call
        saved = [(label, t, t.clone()) for label, t in tensors]
        calls_before = [len(m.calls) for m in models]
        self.depth += 1
        try:
            with observing() as seen:
                result = fn(*args, **kwargs)
        except Exception as exc:
            if hasattr(exc, "add_note") and not isinstance(exc, NotImplementedError):
                exc.add_note(f"raised inside your {qualname}({_describe(args[method:], kwargs)})")
            raise
        finally:
            self.depth -= 1
        self.last = seen
        self._check(qualname, seen, saved, zip(models, calls_before, strict=True))
        rule = self.rules.get(qualname, Rule())
        if rule.probe is not None:
            if qualname not in self.probed:
                self.depth += 1
                try:
                    self.probed[qualname] = rule.probe(fn, bound)
                finally:
                    self.depth -= 1
            if self.probed[qualname]:
                raise GuardFailure(self.probed[qualname])
        return result

    def _check(self, qualname: str, seen: Observation, saved: list, model_logs) -> None:
        """Fail unless the call left its inputs alone and kept to the rules."""
        __tracebackhide__ = True
        for label, t, before in saved:
            if not _same(before, t):
                raise GuardFailure(
                    f"{qualname} changed its argument `{label}` in place; inputs must be left "
                    "alone (the caller may still need them). Work on a copy or on new tensors"
                )
        rule = self.rules.get(qualname, Rule())
        used = sorted(rule.forbidden & seen.ops)
        if used:
            raise GuardFailure(
                f"forbidden call: {qualname} ran {', '.join(used)}; {rule.why}. Write the "
                "computation with the operations the kata's README describes"
            )
        if rule.kernel and not seen.launches:
            raise GuardFailure(
                f"no kernel: {qualname} launched no Triton kernel; this level's task is a Triton "
                "kernel (`kernel[grid](...)`), not PyTorch operations"
            )
        for model, start in model_logs:
            if any(c.grad_enabled for c in model.calls[start:]):
                raise GuardFailure(
                    f"grad mode: {qualname} ran the model with autograd on, building a graph of "
                    "every step it will never use; decode under torch.no_grad() (or "
                    "torch.inference_mode())"
                )


def guard_module(kata: str, module: ModuleType, stub: Path) -> Guard:
    """Wrap, in `module` itself, every function and class method of the kata's API."""
    guard = Guard(kata, rules_for(kata))
    for name in api_names(stub):
        obj = getattr(module, name, None)
        if inspect.isclass(obj):
            if not issubclass(obj, (BaseException, tuple)):  # exceptions, named tuples: data
                for cls in obj.__mro__[:-1]:  # the class, and the bases the file defines
                    if cls is obj or cls.__module__ == module.__name__:
                        _guard_class(guard, cls, name)
        elif callable(obj):  # a function, or anything else that stands in for one
            setattr(module, name, guard.wrap(obj, name, method=False))
    return guard


def _guard_class(guard: Guard, cls: type, name: str) -> None:
    """Wrap the class's own public methods, __init__ and __call__, and its properties' getters."""
    for attr, value in list(vars(cls).items()):
        if attr.startswith("_") and attr not in ("__init__", "__call__"):
            continue
        if getattr(getattr(value, "fget", value), "__guard__", None) is not None:
            continue  # a base shared by two classes of the API: wrapped already
        qualname = f"{name}.{attr}"
        if inspect.isfunction(value):
            setattr(cls, attr, guard.wrap(value, qualname, method=True))
        elif isinstance(value, staticmethod):
            setattr(cls, attr, staticmethod(guard.wrap(value.__func__, qualname, method=False)))
        elif isinstance(value, classmethod):
            setattr(cls, attr, classmethod(guard.wrap(value.__func__, qualname, method=True)))
        elif isinstance(value, property) and value.fget is not None:
            fget = guard.wrap(value.fget, qualname, method=True)
            setattr(cls, attr, property(fget, value.fset, value.fdel, value.__doc__))


# ----------------------------------------------------------------------------------------------
# The judge cannot be changed

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


class JudgeSnapshot:
    """Every attribute of the judging modules (and of the classes they define), by identity."""

    def __init__(self, test_modules: list[ModuleType]) -> None:
        with observing():  # entering the counters once makes PyTorch finish its lazy imports
            torch.zeros(1).sum()
        self.seen: dict[tuple[str, str], tuple[dict, dict[str, int]]] = {}
        for module in _judge_modules(test_modules):
            self._record(module.__name__, vars(module))
            for attr, value in list(vars(module).items()):
                if isinstance(value, type) and value.__module__ == module.__name__:
                    self._record(f"{module.__name__}.{attr}", vars(value))
                elif isinstance(value, dict) and module.__name__.startswith("grading"):
                    self._record(f"{module.__name__}.{attr}", value)
        self._record("torch.Tensor", vars(torch.Tensor))
        self._record("torch._C.TensorBase", vars(torch._C.TensorBase))

    def _record(self, where: str, namespace) -> None:
        self.seen[where, ""] = (namespace, {k: id(v) for k, v in list(namespace.items())})

    def changes(self) -> list[str]:
        """What was replaced or removed since the snapshot, as `module.attribute` names."""
        changed = []
        for (where, _), (namespace, ids) in self.seen.items():
            for key, ident in ids.items():
                try:
                    now = namespace[key]
                except KeyError:
                    changed.append(f"{where}.{key} (removed)")
                    continue
                if id(now) != ident:
                    changed.append(f"{where}.{key}")
        return changed
