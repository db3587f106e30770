"""Snapshots of what a call into the implementation is given, taken before the call to compare
after it (the guards of `grading.judge.guards` fail on each difference):

- the tensors in an argument, also inside lists, tuples, dicts, dataclass instances and other
  objects' attributes (`tensors_in`), each compared bit for bit (`same`: -0.0 is not 0.0) and in
  its memory, layout and autograd state (`layout_of`) and its count of in-place writes
  (`version_of`);
- a copy of the plain data in an argument (`plain_copy`: lists, dicts, requests and prompts, the
  attributes of an object such as a cache given to read), compared by `first_difference`;
- the state of a model or module given (`module_state`: its weights, buffers, train/eval mode,
  settings and hooks), compared by `module_difference`;
- PyTorch's global settings (`global_settings`: grad mode, default dtype, ...).
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any

import torch

from grading.judge.observe import storage_address


def _is_object(value: Any) -> bool:
    """An instance of a plain Python class (a cache object of the implementation's own class),
    whose attributes are the caller's: not a tensor, module, class, function or callable."""
    return hasattr(value, "__dict__") and not (
        isinstance(value, (torch.Tensor, torch.nn.Module, type, ModuleType)) or callable(value)
    )


def tensors_in(value: Any, name: str, depth: int = 0, objects: bool = True):
    """(name, tensor) for every tensor in `value`, looking inside lists, tuples, dicts,
    dataclass instances (a `Request`) and, with `objects`, other objects' attributes (a
    `PagedKVCache`)."""
    if isinstance(value, torch.Tensor):
        yield name, value
    elif depth > 8:
        return
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from tensors_in(item, f"{name}[{i}]", depth + 1, objects)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from tensors_in(item, f"{name}[{key!r}]", depth + 1, objects)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from tensors_in(
                getattr(value, field.name), f"{name}.{field.name}", depth + 1, objects
            )
    elif objects and _is_object(value):
        for key, item in list(vars(value).items()):
            yield from tensors_in(item, f"{name}.{key}", depth + 1)


_OPAQUE = ("opaque",)  # what `plain_copy` records for an object it does not look inside


def plain_copy(value: Any, depth: int = 0) -> tuple:
    """A copy of the plain data in `value`, to compare after the call: numbers and strings, and
    the lists, tuples, dicts, dataclass instances and other objects holding them (a request's
    prompt, its max_new_tokens; a cache object's tables), as ("value" | "items" | "fields",
    type, contents[, the object itself]: a list replaced by an equal one is a change too). A
    tensor is recorded as itself ("tensor"): another one in its place, however equal, is a
    change (its values are compared by `same`). What has no attributes of its own (a
    generator) is not looked into, nor are modules (`module_state`)."""
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None))):
        return ("value", type(value), value)
    if isinstance(value, torch.Tensor):
        return ("tensor", torch.Tensor, value)
    if depth > 8:
        return _OPAQUE
    if isinstance(value, (list, tuple)):
        items = [(i, plain_copy(v, depth + 1)) for i, v in enumerate(value)]
        return ("items", type(value), items, value)
    if isinstance(value, dict):
        return (
            "items",
            type(value),
            [(k, plain_copy(v, depth + 1)) for k, v in value.items()],
            value,
        )
    params = getattr(type(value), "__dataclass_params__", None)
    if params is not None and params.frozen:  # a request: its fields are the caller's
        fields = dataclasses.fields(value)
        items = [(f.name, plain_copy(getattr(value, f.name), depth + 1)) for f in fields]
        return ("fields", type(value), items, value)
    if _is_object(value):  # a cache object given to read: its attributes are the caller's
        items = [(key, plain_copy(v, depth + 1)) for key, v in list(vars(value).items())]
        return ("object", type(value), items, value)
    return _OPAQUE


def first_difference(before: tuple, after: tuple, name: str, later: bool = False) -> str | None:
    """Where two `plain_copy` copies first differ, as a path from `name` (None: nowhere). `later`:
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
        if (where := first_difference(b, a, label, later)) is not None:
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


def same(before: torch.Tensor, after: torch.Tensor) -> bool:
    """The same values, bit for bit."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    return torch.equal(_bits(before), _bits(after))


def version_of(t: torch.Tensor) -> int | None:
    """How many times `t` was written to in place (through itself or a view; not through
    `.data`, which `same` sees instead); None for a tensor that does not count (an inference
    tensor)."""
    try:
        return t._version
    except RuntimeError:
        return None


def layout_of(t: torch.Tensor) -> tuple:
    """What a caller holding `t` sees besides its values: its memory, where in it and how laid
    out, its shape and type, and its autograd state (a `.data = ...`, `set_`, `resize_`,
    `as_strided_` or `requires_grad_` changes one of these, or a `.grad` given to it)."""
    return (
        storage_address(t), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, t.device,
        t.requires_grad, id(t.grad) if t.is_leaf and t.grad is not None else None,
    )  # fmt: skip


def modules_in(value: Any):
    """The PyTorch modules (a model, an MoE layer) in an argument, also inside lists and
    tuples."""
    if isinstance(value, torch.nn.Module):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from modules_in(item)


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
                settings.append((key, plain_copy(value)))
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


def module_state(module: torch.nn.Module) -> tuple[list, list]:
    """`_module_members`, each tensor with its layout and a copy of its values."""
    parts, tensors = _module_members(module)
    return parts, [(name, t, layout_of(t), t.detach().clone()) for name, t in tensors]


def module_difference(label: str, module: torch.nn.Module, before: tuple) -> str | None:
    """What of `module` differs from its state `before`, named from `label`; None: nothing."""
    parts, tensors = _module_members(module)
    if len(parts) != len(before[0]) or len(tensors) != len(before[1]):
        return f"`{label}` (its submodules, parameters or buffers)"
    for (name, *now), (_, *then) in zip(parts, before[0], strict=True):
        if now != then:
            where = f"{label}.{name}" if name else label
            return f"`{where}` (its train/eval mode, settings, hooks or members)"
    for (name, t), (_, was, layout, values) in zip(tensors, before[1], strict=True):
        if t is not was or layout_of(t) != layout or not same(values, t.detach()):
            return f"`{label}.{name}`"
    return None


def global_settings() -> dict[str, Any]:
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
