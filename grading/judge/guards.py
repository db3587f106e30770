"""Guards around every call the tests make into the implementation under test.

`guard_module(kata, module)` replaces, in place, each public function of the kata's API and each
public method of its classes with a wrapper that (on the outermost call only; the
implementation's calls into itself pass straight through):

- runs the call under the always-on counters of `grading.judge.observe` and keeps what they saw in
  `guard.last` (the cost helpers of `grading.judge.cost` read it);
- fails if the call changed a tensor it was given (also inside lists, tuples and dicts), bit for
  bit or in its memory, layout or autograd state, naming the function and the argument, or
  wrote into one at all, even to put it back before returning;
- fails if the call changed the plain data it was given (lists, dicts, requests and prompts,
  the attributes of an object such as a cache given to read), or a model or module (its
  weights, buffers, train/eval mode, settings); all of it, tensors included, is checked again
  when the test ends, for what changes it later (a finaliser, a lazy result; a test that
  changes its own tensors after a call says so first: `caller_changes`);
- fails if the implementation put its own functions back in place of the wrappers, or left
  PyTorch's global settings (grad mode, default dtype, ...) other than it found them;
- fails if the call ran an operator its kata forbids, or (for a kernel task) launched no Triton
  kernel, or did more work than the function's budget allows (`grading.judge.rules`);
- fails if the call ran the shared model with grad mode on (an autograd graph per token);
- fails if the result holds a tensor of another type than `torch.Tensor` (a subclass can make
  any comparison come out equal), or one that shares its memory with a tensor argument (a view
  of an input handed back as the answer);
- fails if the judge (`grading.judge.integrity`) was changed during the call, so that a patch
  that undoes itself before the test ends is seen too.

The wrappers are transparent: `functools.wraps` keeps names, docstrings and signatures, classes
stay the same classes (isinstance, dataclasses and exceptions behave as before), and exceptions
the implementation raises pass through unchanged, traceback included.

What a call is given is recorded before it and compared after it by `grading.judge.snapshots`;
the checks here turn each difference into a `GuardFailure` that names the function and argument.
"""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from grading.devices import gpu_path
from grading.judge.integrity import JudgeSnapshot, judge_changed
from grading.judge.observe import Observation, observing, storage_address
from grading.judge.rules import Rule, rules_for
from grading.judge.snapshots import (
    first_difference,
    global_settings,
    layout_of,
    module_difference,
    module_state,
    modules_in,
    plain_copy,
    same,
    tensors_in,
    version_of,
)
from grading.model import TinyLlama

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


def _settings_unchanged(qualname: str, before: dict[str, Any]) -> None:
    __tracebackhide__ = True
    now = global_settings()
    if changed := [f"{k} {before[k]} -> {now[k]}" for k in before if now[k] != before[k]]:
        raise GuardFailure(
            f"{qualname} changed PyTorch's global settings and left them so ({', '.join(changed)})"
            "; a call must leave the process as it found it: set them for your own work inside "
            "a `with` block (torch.no_grad(), say), which puts them back"
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

    def __init__(self, kata: str, rules: dict[str, Rule], judge: JudgeSnapshot | None) -> None:
        self.kata = kata
        self.rules = rules
        self.judge = judge  # checked after every outermost call
        self.depth = 0  # > 0 while a guarded call runs: inner calls pass straight through
        self.last = Observation()  # what the latest outermost call did
        self.probed: dict[str, str | None] = {}  # each probe's verdict, run once per function
        self.calls: dict[str, int] = {}  # outermost calls per function in the current test
        self.plain: list[tuple[str, list]] = []  # each call's plain arguments in this test
        # The tensors and modules the calls of this test were given, by id, each as the latest
        # call left it: (qualname, label, the tensor, its values, layout, version) and
        # (qualname, label, the module, its state). Held until the test ends.
        self.later: dict[int, tuple] = {}
        self.later_modules: dict[int, tuple] = {}
        # Where the wrappers were put ({attribute: value} namespace, attribute) and the wrappers:
        # an implementation that puts its unguarded functions back is seen.
        self.slots: list[tuple[Any, str]] = []
        self.wrappers: list[Any] = []

    def new_test(self) -> None:
        self.calls.clear()
        self.plain.clear()
        self.later.clear()
        self.later_modules.clear()

    def place(self, owner: Any, attr: str, wrapper: Any) -> None:
        """Put `wrapper` at `owner.attr` (a module's function, a class's method), and remember
        it there."""
        setattr(owner, attr, wrapper)
        self.slots.append((vars(owner), attr))
        self.wrappers.append(wrapper)

    def caller_changes(self, values: tuple) -> None:
        """The test itself changes these tensors (and every view of their memory), modules or
        lists after the calls it gave them to: leave them out of the check at the test's end."""
        addresses = {storage_address(v) for v in values if isinstance(v, torch.Tensor)}
        modules = {id(v) for v in values if isinstance(v, torch.nn.Module)}
        lists = {id(v) for v in values if isinstance(v, (list, dict))}
        self.plain = [
            (qualname, [(name, value, before) for name, value, before in plain
                        if id(value) not in lists])
            for qualname, plain in self.plain
        ]  # fmt: skip
        for key, entry in list(self.later.items()):
            if storage_address(entry[2]) in addresses:
                del self.later[key]
        for key in modules:
            self.later_modules.pop(key, None)

    def after_test(self) -> None:
        """Fail when what a call of this test was given changed after the call returned (a
        finaliser or a lazy result that writes to the caller's lists, tensors or models later),
        or when the implementation put its unguarded functions back in place of the wrappers."""
        __tracebackhide__ = True
        self._still_guarded()
        when = " after it returned (through what it left behind)"
        for qualname, plain in reversed(self.plain):  # the latest call first: the likeliest
            _plain_data_unchanged(qualname, plain, when)
        for qualname, label, t, values, layout, version in reversed(self.later.values()):
            if not same(values, t) or layout_of(t) != layout or version_of(t) != version:
                raise GuardFailure(
                    f"{qualname} changed its argument `{label}`{when}: a tensor you are given "
                    "must stay as it is after the call too (bit for bit, in its memory, layout "
                    "and autograd state); nothing you return or keep may change it later (a "
                    "finaliser, a lazy result). Work on a copy or on new tensors"
                )
        _modules_unchanged("", list(reversed(self.later_modules.values())), when)

    def _still_guarded(self) -> None:
        __tracebackhide__ = True
        if [ns.get(attr) for ns, attr in self.slots] != self.wrappers:
            moved = [a for (ns, a), w in zip(self.slots, self.wrappers, strict=True)
                     if ns.get(a) is not w]  # fmt: skip
            raise GuardFailure(
                f"the judge was changed: the implementation replaced its own {', '.join(moved)} "
                "after the harness had put its checks around them (the tests call them through "
                "the harness: grading/judge/guards.py). A solution may not patch the test harness"
            )

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
            binding = signature.bind(*args, **kwargs)
            binding.apply_defaults()  # a budget counts the splits a default num_splits makes
            bound = binding.arguments
        except (TypeError, AttributeError):  # the call itself will say what is wrong
            bound = {f"argument {i}": a for i, a in enumerate(args)} | kwargs
        names = list(bound)[1:] if method else list(bound)
        rule = self.rules.get(qualname, Rule())
        names = [n for n in names if n not in rule.changes]  # a cache it appends to, by contract
        tensors = [(label, t) for n in names for label, t in tensors_in(bound[n], n)]
        self.calls[qualname] = self.calls.get(qualname, 0) + 1
        models = [m for m in (*args, *kwargs.values()) if isinstance(m, TinyLlama)]
        on_gpu = any(gpu_path(t) for _, t in tensors) or any(
            gpu_path(m.embed.weight) for m in models
        )
        if self.calls[qualname] > GPU_CALLS and on_gpu:
            return self.unobserved(fn, *args, **kwargs)  # a benchmark's hundredth call
        saved = [(label, t, t.clone(), layout_of(t)) for label, t in tensors]
        later = {label for n in names for label, _ in tensors_in(bound[n], n, objects=False)}
        modules = [(n, m, module_state(m)) for n in names for m in modules_in(bound[n])]
        plain = [(n, bound[n], plain_copy(bound[n])) for n in names]
        watched: dict[int, str] = {}  # storage address -> the arguments whose memory it is
        for label, t in tensors:
            if address := storage_address(t):
                watched[address] = (
                    f"{watched[address]}` / `{label}" if address in watched else label
                )
        calls_before = [len(m.calls) for m in models]
        torch_settings = global_settings()
        self.depth += 1
        try:
            with observing(watched, integers=rule.lists_integers) as seen:
                result = fn(*args, **kwargs)
        except Exception as exc:
            if hasattr(exc, "add_note") and not isinstance(exc, NotImplementedError):
                exc.add_note(f"raised inside your {qualname}({_describe(args[method:], kwargs)})")
            raise
        finally:
            self.depth -= 1
            self._judge_unchanged(qualname)
            self._still_guarded()
        self.last = seen
        _settings_unchanged(qualname, torch_settings)
        self._check(qualname, seen, saved, zip(models, calls_before, strict=True))
        _plain_data_unchanged(qualname, plain)
        if kept := [entry for entry in plain if entry[2][0] in ("items", "fields")]:
            self.plain.append((qualname, kept))
        _modules_unchanged(qualname, modules)
        for label, t, before, layout in saved:  # checked again when the test ends
            if label in later:  # not inside an object, which its own methods may change
                self.later[id(t)] = (qualname, label, t, before, layout, version_of(t))
        for name, module, state in modules:
            self.later_modules[id(module)] = (qualname, name, module, state)
        _plain_tensors(qualname, result)
        _not_aliasing_arguments(qualname, result, watched)
        if rule.budget is not None:
            _within_budget(qualname, seen, rule.budget(bound), _describe(args[method:], kwargs))
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

    def _judge_unchanged(self, qualname: str) -> None:
        __tracebackhide__ = True
        changed = self.judge.changes() if self.judge is not None else []
        if changed:
            raise GuardFailure(judge_changed(changed, f"during a call of {qualname}"))

    def _check(self, qualname: str, seen: Observation, saved: list, model_logs) -> None:
        """Fail unless the call left its inputs alone and kept to the rules."""
        __tracebackhide__ = True
        for label, t, before, layout in saved:
            if not same(before, t):
                raise GuardFailure(
                    f"{qualname} changed its argument `{label}` in place; inputs must be left "
                    "alone (the caller may still need them). Work on a copy or on new tensors"
                )
            if layout_of(t) != layout:
                raise GuardFailure(
                    f"{qualname} changed its argument `{label}` in place: its values are the "
                    "same, but not its memory, layout or autograd state (`.data = ...`, "
                    "`set_`, `resize_`, `as_strided_`, `requires_grad_`, `.grad`); inputs must "
                    "be left alone. Work on a copy or on new tensors"
                )
        if seen.inputs_written:
            label, op = seen.inputs_written[0]
            raise GuardFailure(
                f"{qualname} wrote into its argument `{label}` during the call ({op}), though "
                "it held the same values again by the end; inputs must be left alone for the "
                "whole call, not only put back before returning (whatever else reads that memory "
                "meanwhile, a view of it passed as another argument say, sees the changed "
                "values). Work on a copy or on new tensors"
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


def _plain_data_unchanged(qualname: str, plain: list, when: str = "") -> None:
    """Fail when the call changed a list, dict or dataclass it was given (a request's prompt
    extended, a list of requests sorted or emptied)."""
    __tracebackhide__ = True
    for name, value, before in plain:
        where = first_difference(before, plain_copy(value), name, later=bool(when))
        if where is not None:
            raise GuardFailure(
                f"{qualname} changed its argument `{where}` in place{when}; arguments must be left "
                "alone (the caller may still need them): the lists, requests and prompts you are "
                "given too, not only tensors. Work on a copy (`list(prompt)`, `sorted(requests)`)"
            )


def _modules_unchanged(qualname: str, modules: list, when: str = "") -> None:
    """Fail when the call changed a model or module it was given (its weights, buffers, mode or
    settings). `modules`: (name, module, state), or (qualname, name, module, state) each."""
    __tracebackhide__ = True
    for *call, name, module, before in modules:
        where = module_difference(name, module, before)
        if where is not None:
            raise GuardFailure(
                f"{call[0] if call else qualname} changed its argument {where} in place{when}; "
                "the models and modules you "
                "are given must be left as they are: their weights and buffers, train/eval mode "
                "and settings (the caller, and the next call, use them). Work on copies of what "
                "you need"
            )


def _plain_tensors(qualname: str, result: Any) -> None:
    """Fail unless every tensor in the result is exactly a torch.Tensor."""
    __tracebackhide__ = True
    for label, t in tensors_in(result, "result"):
        if type(t) is not torch.Tensor:
            raise GuardFailure(
                f"not a plain tensor: {qualname} returned a {type(t).__module__}."
                f"{type(t).__qualname__} as `{label}`; results must be torch.Tensor itself (a "
                "subclass can change how the tests compare it). Return the tensor you computed"
            )


def _not_aliasing_arguments(qualname: str, result: Any, watched: dict[int, str]) -> None:
    """Fail when a tensor in the result shares its memory with a tensor argument."""
    __tracebackhide__ = True
    for label, t in tensors_in(result, "result"):
        address = storage_address(t) if t.numel() else 0  # an empty result holds nothing
        if address and address in watched:
            raise GuardFailure(
                f"aliasing: {qualname} returned `{label}`, which shares its memory with its "
                f"argument `{watched[address]}` (a view of it, or the tensor itself): whoever "
                "writes to one changes the other, and the caller's input is not a result. "
                "Return a new tensor (`.clone()` a slice you want to hand back)"
            )


def _within_budget(qualname: str, seen: Observation, budget, call: str) -> None:
    """Fail when the call did more work than its budget (grading.judge.rules)."""
    __tracebackhide__ = True
    loads = seen.kernel_loads
    work = seen.work + (loads if budget.kernel_loads is None else 0)
    if work > budget.work:
        kernels = f", {loads:,} elements Triton kernels loaded" if loads else ""
        raise GuardFailure(
            f"over budget: {qualname}({call}) did {work:,} units of work (FLOPs of products "
            f"plus every element PyTorch operators read and wrote and Triton kernels loaded; "
            f"{seen.flops:,} FLOPs{kernels}), more than the {budget.work:,} its budget allows: "
            f"{budget.what}. Every call is held to the cost the README states, measured or not; "
            "elementwise products and sums count too, and so does work inside a kernel"
        )
    if budget.kernel_loads is not None and loads > budget.kernel_loads:
        most = max((launch.most_loaded_by_one_program for launch in seen.launches), default=0)
        raise GuardFailure(
            f"over budget: {qualname}({call})'s Triton kernels loaded {loads:,} elements (the "
            f"most by one program: {most:,}), more than the {budget.kernel_loads:,} its budget "
            f"allows: {budget.kernel_what}. Work inside a kernel is held to the cost the README "
            "states too"
        )
    products = seen.multiplies + seen.flops // 2
    if budget.products is not None and products > budget.products:
        raise GuardFailure(
            f"over budget: {qualname}({call}) did {products:,} multiplications (elementwise, "
            f"matrix-vector and matrix products), more than the {budget.products:,} its budget "
            f"allows: {budget.products_what}. Every call is held to the cost the README states, "
            "measured or not"
        )


def guard_module(
    kata: str, module: ModuleType, stub: Path, judge: JudgeSnapshot | None = None
) -> Guard:
    """Wrap, in `module` itself, every function and class method of the kata's API; `judge`,
    when given, is checked after every call."""
    guard = Guard(kata, rules_for(kata), judge)
    for name in api_names(stub):
        obj = getattr(module, name, None)
        if inspect.isclass(obj):
            if not issubclass(obj, (BaseException, tuple)):  # exceptions, named tuples: data
                for cls in obj.__mro__[:-1]:  # the class, and the bases the file defines
                    if cls is obj or cls.__module__ == module.__name__:
                        _guard_class(guard, cls, name)
        elif callable(obj):  # a function, or anything else that stands in for one
            guard.place(module, name, guard.wrap(obj, name, method=False))
    return guard


def caller_changes(fn, *values: Any) -> None:
    """For a test that changes, after the calls it gave them to, its own tensors (a caller
    reusing its buffers), modules or lists: the guard of `fn` (any guarded function or method of the
    implementation) leaves them, and every view of their memory, out of its check at the test's
    end. A test calls it right before it makes the change."""
    fn.__guard__.caller_changes(values)


def _guard_class(guard: Guard, cls: type, name: str) -> None:
    """Wrap the class's own public methods, __init__ and __call__, and its properties' getters."""
    for attr, value in list(vars(cls).items()):
        if attr.startswith("_") and attr not in ("__init__", "__call__"):
            continue
        if getattr(getattr(value, "fget", value), "__guard__", None) is not None:
            continue  # a base shared by two classes of the API: wrapped already
        qualname = f"{name}.{attr}"
        if inspect.isfunction(value):
            guard.place(cls, attr, guard.wrap(value, qualname, method=True))
        elif isinstance(value, staticmethod):
            wrapper = staticmethod(guard.wrap(value.__func__, qualname, method=False))
            guard.place(cls, attr, wrapper)
        elif isinstance(value, classmethod):
            guard.place(cls, attr, classmethod(guard.wrap(value.__func__, qualname, method=True)))
        elif isinstance(value, property) and value.fget is not None:
            fget = guard.wrap(value.fget, qualname, method=True)
            guard.place(cls, attr, property(fget, value.fset, value.fdel, value.__doc__))
