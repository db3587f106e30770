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
- fails if the judge (see below) was changed during the call, so that a patch that undoes
  itself before the test ends is seen too.

The wrappers are transparent: `functools.wraps` keeps names, docstrings and signatures, classes
stay the same classes (isinstance, dataclasses and exceptions behave as before), and exceptions
the implementation raises pass through unchanged, traceback included.

`JudgeSnapshot` records what judges (the `grading` modules, the test modules, the PyTorch
functions the oracles and counters use, the counters' operator table, Hypothesis's settings)
before the implementation is imported; after each guarded call and each test `changes()` lists
whatever was replaced since: an attribute, or a function's code, defaults or closure.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import operator
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from hypothesis import settings

from grading.devices import gpu_path
from grading.judge import observe
from grading.judge.observe import Observation, observing, storage_address
from grading.judge.rules import Rule, rules_for
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


def _is_object(value: Any) -> bool:
    """An instance of a plain Python class (a cache object of the implementation's own class),
    whose attributes are the caller's: not a tensor, module, class, function or callable."""
    return hasattr(value, "__dict__") and not (
        isinstance(value, (torch.Tensor, torch.nn.Module, type, ModuleType)) or callable(value)
    )


def _tensors(value: Any, name: str, depth: int = 0, objects: bool = True):
    """(name, tensor) for every tensor in `value`, looking inside lists, tuples, dicts,
    dataclass instances (a `Request`) and, with `objects`, other objects' attributes (a
    `PagedKVCache`)."""
    if isinstance(value, torch.Tensor):
        yield name, value
    elif depth > 8:
        return
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{name}[{i}]", depth + 1, objects)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{name}[{key!r}]", depth + 1, objects)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _tensors(
                getattr(value, field.name), f"{name}.{field.name}", depth + 1, objects
            )
    elif objects and _is_object(value):
        for key, item in list(vars(value).items()):
            yield from _tensors(item, f"{name}.{key}", depth + 1)


_OPAQUE = ("opaque",)  # what `_plain` records for an object it does not look inside


def _plain(value: Any, depth: int = 0) -> tuple:
    """A copy of the plain data in `value`, to compare after the call: numbers and strings, and
    the lists, tuples, dicts, dataclass instances and other objects holding them (a request's
    prompt, its max_new_tokens; a cache object's tables), as ("value" | "items" | "fields",
    type, contents[, the object itself]: a list replaced by an equal one is a change too). A
    tensor is recorded as itself ("tensor"): another one in its place, however equal, is a
    change (its values are compared by `_same`). What has no attributes of its own (a
    generator) is not looked into, nor are modules (`_module_state`)."""
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None))):
        return ("value", type(value), value)
    if isinstance(value, torch.Tensor):
        return ("tensor", torch.Tensor, value)
    if depth > 8:
        return _OPAQUE
    if isinstance(value, (list, tuple)):
        items = [(i, _plain(v, depth + 1)) for i, v in enumerate(value)]
        return ("items", type(value), items, value)
    if isinstance(value, dict):
        return ("items", type(value), [(k, _plain(v, depth + 1)) for k, v in value.items()], value)
    params = getattr(type(value), "__dataclass_params__", None)
    if params is not None and params.frozen:  # a request: its fields are the caller's
        fields = dataclasses.fields(value)
        items = [(f.name, _plain(getattr(value, f.name), depth + 1)) for f in fields]
        return ("fields", type(value), items, value)
    if _is_object(value):  # a cache object given to read: its attributes are the caller's
        items = [(key, _plain(v, depth + 1)) for key, v in list(vars(value).items())]
        return ("object", type(value), items, value)
    return _OPAQUE


def _first_difference(before: tuple, after: tuple, name: str, later: bool = False) -> str | None:
    """Where two `_plain` copies first differ, as a path from `name` (None: nowhere). `later`:
    after the call, when an object's own methods may have changed it since (a cache the test
    appends to after reading it)."""
    if before[:2] != after[:2]:
        return name
    kind = before[0]
    if kind == "object" and later:
        return None
    if kind == "value":
        nan = before[2] != before[2] and after[2] != after[2]
        return None if before[2] == after[2] or nan else name
    if kind == "opaque":
        return None
    if kind == "tensor":  # another tensor in its place
        return None if before[2] is after[2] else name
    if before[3] is not after[3]:  # the same values in another object: the caller's is gone
        return name
    if [key for key, _ in before[2]] != [key for key, _ in after[2]]:
        return f"len({name})" if before[1] is not dict and kind == "items" else name
    for (key, b), (_, a) in zip(before[2], after[2], strict=True):
        label = f"{name}[{key!r}]" if kind == "items" else f"{name}.{key}"
        if (where := _first_difference(b, a, label, later)) is not None:
            return where
    return None


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # by element size


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as integers of the same width: -0.0 differs from 0.0 there, and a
    NaN from a NaN of another payload."""
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype == torch.bool or t.element_size() not in _BITS:
        return t
    return t.view(_BITS[t.element_size()])


def _same(before: torch.Tensor, after: torch.Tensor) -> bool:
    """The same values, bit for bit."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    return torch.equal(_bits(before), _bits(after))


def _version(t: torch.Tensor) -> int | None:
    """How many times `t` was written to in place (through itself or a view; not through
    `.data`, which `_same` sees instead); None for a tensor that does not count (an inference
    tensor)."""
    try:
        return t._version
    except RuntimeError:
        return None


def _layout(t: torch.Tensor) -> tuple:
    """What a caller holding `t` sees besides its values: its memory, where in it and how laid
    out, its shape and type, and its autograd state (a `.data = ...`, `set_`, `resize_`,
    `as_strided_` or `requires_grad_` changes one of these, or a `.grad` given to it)."""
    return (
        storage_address(t), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, t.device,
        t.requires_grad, id(t.grad) if t.is_leaf and t.grad is not None else None,
    )  # fmt: skip


def _modules(value: Any):
    """The PyTorch modules (a model, an MoE layer) in an argument, also inside lists and
    tuples."""
    if isinstance(value, torch.nn.Module):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _modules(item)


def _module_members(module: torch.nn.Module) -> tuple[list, list]:
    """What a caller holding `module` sees of it: each submodule's type, train or eval mode,
    plain settings (its config), hooks and members; and each parameter, buffer and tensor
    attribute, by name. The logs a model keeps of its own calls (lists) are its own to write."""
    parts, tensors = [], []
    for name, sub in module.named_modules(remove_duplicate=False):
        settings = []
        for key, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not key.startswith("_"):
                tensors.append((f"{name}.{key}".lstrip("."), value))
            elif not key.startswith("_") and not isinstance(value, (list, dict, torch.nn.Module)):
                settings.append((key, _plain(value)))
            elif key.endswith("hooks") and isinstance(value, dict):
                settings.append((key, len(value)))
        members = [*sub._parameters, "|", *sub._buffers, "|", *sub._modules]
        parts.append((name, type(sub), sub.training, settings, members))
    for name, t in (
        *module.named_parameters(remove_duplicate=False),
        *module.named_buffers(remove_duplicate=False),
    ):
        tensors.append((name, t))
    return parts, tensors


def _module_state(module: torch.nn.Module) -> tuple[list, list]:
    """`_module_members`, each tensor with its layout and a copy of its values."""
    parts, tensors = _module_members(module)
    return parts, [(name, t, _layout(t), t.detach().clone()) for name, t in tensors]


def _module_difference(label: str, module: torch.nn.Module, before: tuple) -> str | None:
    """What of `module` differs from its state `before`, named from `label`; None: nothing."""
    parts, tensors = _module_members(module)
    if len(parts) != len(before[0]) or len(tensors) != len(before[1]):
        return f"`{label}` (its submodules, parameters or buffers)"
    for (name, *now), (_, *then) in zip(parts, before[0], strict=True):
        if now != then:
            where = f"{label}.{name}" if name else label
            return f"`{where}` (its train/eval mode, settings, hooks or members)"
    for (name, t), (_, was, layout, values) in zip(tensors, before[1], strict=True):
        if t is not was or _layout(t) != layout or not _same(values, t.detach()):
            return f"`{label}.{name}`"
    return None


def _torch_settings() -> dict[str, Any]:
    """PyTorch's global settings, which a call must leave as it found them (the caller, and every
    test after it, runs under them)."""
    return {
        "grad mode": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "default dtype": torch.get_default_dtype(),
        "default device": torch.get_default_device(),
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "threads": torch.get_num_threads(),
    }


def _settings_unchanged(qualname: str, before: dict[str, Any]) -> None:
    __tracebackhide__ = True
    now = _torch_settings()
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
        """The test itself changes these tensors (and every view of their memory) or modules
        after the calls it gave them to: leave them out of the check at the test's end."""
        addresses = {storage_address(v) for v in values if isinstance(v, torch.Tensor)}
        modules = {id(v) for v in values if isinstance(v, torch.nn.Module)}
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
            if not _same(values, t) or _layout(t) != layout or _version(t) != version:
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
        tensors = [(label, t) for n in names for label, t in _tensors(bound[n], n)]
        self.calls[qualname] = self.calls.get(qualname, 0) + 1
        models = [m for m in (*args, *kwargs.values()) if isinstance(m, TinyLlama)]
        on_gpu = any(gpu_path(t) for _, t in tensors) or any(
            gpu_path(m.embed.weight) for m in models
        )
        if self.calls[qualname] > GPU_CALLS and on_gpu:
            return self.unobserved(fn, *args, **kwargs)  # a benchmark's hundredth call
        saved = [(label, t, t.clone(), _layout(t)) for label, t in tensors]
        later = {label for n in names for label, _ in _tensors(bound[n], n, objects=False)}
        modules = [(n, m, _module_state(m)) for n in names for m in _modules(bound[n])]
        plain = [(n, bound[n], _plain(bound[n])) for n in names]
        watched: dict[int, str] = {}  # storage address -> the arguments whose memory it is
        for label, t in tensors:
            if address := storage_address(t):
                watched[address] = (
                    f"{watched[address]}` / `{label}" if address in watched else label
                )
        calls_before = [len(m.calls) for m in models]
        torch_settings = _torch_settings()
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
                self.later[id(t)] = (qualname, label, t, before, layout, _version(t))
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
            if not _same(before, t):
                raise GuardFailure(
                    f"{qualname} changed its argument `{label}` in place; inputs must be left "
                    "alone (the caller may still need them). Work on a copy or on new tensors"
                )
            if _layout(t) != layout:
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
        where = _first_difference(before, _plain(value), name, later=bool(when))
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
        where = _module_difference(name, module, before)
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
    for label, t in _tensors(result, "result"):
        if type(t) is not torch.Tensor:
            raise GuardFailure(
                f"not a plain tensor: {qualname} returned a {type(t).__module__}."
                f"{type(t).__qualname__} as `{label}`; results must be torch.Tensor itself (a "
                "subclass can change how the tests compare it). Return the tensor you computed"
            )


def _not_aliasing_arguments(qualname: str, result: Any, watched: dict[int, str]) -> None:
    """Fail when a tensor in the result shares its memory with a tensor argument."""
    __tracebackhide__ = True
    for label, t in _tensors(result, "result"):
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


def judge_changed(changed: list[str], when: str) -> str:
    """The message for a judge changed by the implementation."""
    more = " ..." if len(changed) > 5 else ""
    return (
        f"the judge was changed {when}: the implementation replaced {', '.join(changed[:5])}"
        f"{more}. A solution may not patch the test harness (grading), the tests, Hypothesis's "
        "settings or the PyTorch functions they use"
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
    reusing its buffers) or modules: the guard of `fn` (any guarded function or method of the
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
