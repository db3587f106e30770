"""The shared model's own log, checked against the work that really ran.

`model.batch_log` and `model.calls` (grading/model/llama.py) are plain lists, and an implementation
could write to them: run one model call per row, then log a batched call that never happened.
`audited(*models)` checks them. While the block runs, a dispatch mode of the judge counts the
rows that every matrix product multiplies through each model's attention projections (`wq`,
`wk`, `wv`, `wo` of every layer) and its output head, found by their storage, also through a
view such as `weight.T`. Every real call sends each of its tokens through each of those weights
once, in one product (the model's own code, whatever attention or feed-forward the caller
supplies), so each weight's products, in order, must read exactly like the log: one per logged
call, with as many rows as that call fed tokens. And each logged call must name the entry point
that really ran it (`cache=None` in its rows for `forward_packed`, a cache for `forward_batch`),
as the call stack shows it at the output head's product.

The batching and serving test kits run every call they read the log of under `audited`, and
the speculative-decoding tests under `audited(target, draft, log="calls")`, where each plain
call `model(ids, cache)` must have fed `batch x tokens` rows through each weight, in one
product. A mismatch fails as a `GuardFailure`: the log is the evidence every schedule test
reads.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grading.judge.guards import GuardFailure
from grading.model import TinyLlama

# Matrix products as they reach the dispatcher (`linear` and `matmul` arrive as these), by the
# id of each overload: an operator's own hash is slow Python.
_PRODUCTS = frozenset(
    id(getattr(packet, overload))
    for packet in (getattr(torch.ops.aten, name) for name in
                   ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot"))
    for overload in packet.overloads()
)  # fmt: skip


@dataclass
class _Weights:
    """One model's audited weights: storage address -> (name, output features)."""

    model: object
    by_storage: dict[int, tuple[str, int]]
    rows: dict[str, list[int]] = field(default_factory=dict)  # weight name -> rows per product
    # Which entry point ran each call, as the call stack shows it at the output head's product:
    # "forward_packed" or "forward_batch" (the model's own frames, whose code the judge checks).
    entries: list[str] = field(default_factory=list)
    calls: int = 0  # len(model.calls) when the block began
    logged: int = 0  # len(model.batch_log) when the block began


def _weights(model) -> _Weights:
    named = [("lm_head", model.lm_head.weight)]
    for i, block in enumerate(model.blocks):
        attn = block.attn
        named += [
            (f"blocks.{i}.attn.{n}", getattr(attn, n).weight) for n in ("wq", "wk", "wv", "wo")
        ]
    by_storage = {w.untyped_storage().data_ptr(): (name, w.shape[0]) for name, w in named}
    return _Weights(model, by_storage, {name: [] for name, _ in named})


class _RowCounter(TorchDispatchMode):
    """Rows each audited weight multiplied, product by product."""

    def __init__(self, audits: list[_Weights]) -> None:
        super().__init__()
        self.audits = audits

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if id(func) not in _PRODUCTS:
            return out
        for t in args:
            if not isinstance(t, torch.Tensor):
                continue
            ptr = t.untyped_storage().data_ptr()
            for audit in self.audits:
                if ptr in audit.by_storage:
                    name, features = audit.by_storage[ptr]
                    audit.rows[name].append(out.numel() // features)
                    if name == "lm_head":
                        audit.entries.append(_entry_point())
        return out


_ENTRY_POINTS = {
    TinyLlama.forward_packed.__code__: "forward_packed",
    TinyLlama.forward_batch.__code__: "forward_batch",
}


def _entry_point() -> str:
    """The public method of the model that the running call came in through, read from the
    stack: the frame that called the model's `_packed`."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is TinyLlama._packed.__code__:
            caller = frame.f_back
            return _ENTRY_POINTS.get(caller.f_code, "another way") if caller else "another way"
        frame = frame.f_back
    return "another way"


def _short(values: list[int], what: str = "calls feeding", unit: str = "tokens") -> str:
    head = ", ".join(str(v) for v in values[:8])
    more = ", ..." if len(values) > 8 else ""
    return f"{len(values)} {what} {sum(values)} {unit} ({head}{more})"


def _check(w: _Weights, label: str) -> None:
    model = w.model
    if len(model.batch_log) < w.logged or len(model.calls) < w.calls:
        raise GuardFailure(
            f"model log: entries were removed from {label}'s own log (model.batch_log or "
            "model.calls) during the call; the model writes its log, the implementation only "
            "reads it"
        )
    batched = [call.new_tokens for call in model.batch_log[w.logged :]]  # tokens per call
    logged = [
        "forward_packed" if all(row.cache is None for row in call.rows) else "forward_batch"
        for call in model.batch_log[w.logged :]
    ]
    if len(logged) == len(w.entries) and logged != w.entries:
        i = next(i for i, (a, b) in enumerate(zip(logged, w.entries, strict=True)) if a != b)
        raise GuardFailure(
            f"model log: {label}'s call {i} of this call ran through model.{w.entries[i]}, but "
            f"model.batch_log records a {logged[i]} call there (each row's cache): the model "
            "logs each of its calls itself; never write to model.batch_log or model.calls"
        )
    calls = len(model.calls) - w.calls
    for name, rows in w.rows.items():
        if rows == batched and len(rows) == calls:
            continue
        ran = f"{label}'s weight {name} ran in {_short(rows, 'products over', 'rows')}"
        if len(rows) == calls:
            raise GuardFailure(
                f"model log: {ran}, as many as model.calls logs, but model.batch_log records "
                f"{_short(batched)}. Make every model call through model.forward_batch (or "
                "forward_packed), and leave the model's log alone: the tests read it"
            )
        raise GuardFailure(
            f"model log: {ran}, but the model's log records {_short(batched)} in "
            f"model.batch_log and {calls} in model.calls: the log says calls happened that did "
            "not. The model logs each of its calls itself; serve the rows of a step in one real "
            "call, and never write to model.batch_log or model.calls"
        )


def _check_calls(w: _Weights, label: str) -> None:
    """`model.calls` alone: every call fed `batch x tokens` rows through each weight, once."""
    if len(w.model.calls) < w.calls:
        raise GuardFailure(
            f"model log: entries were removed from {label}'s own log (model.calls) during the "
            "call; the model writes its log, the implementation only reads it"
        )
    logged = [call.batch * call.tokens for call in w.model.calls[w.calls :]]
    for name, rows in w.rows.items():
        if rows != logged:
            raise GuardFailure(
                f"model log: {label}'s weight {name} ran in {_short(rows, 'products over', 'rows')}"
                f", but model.calls records {_short(logged)}: the model ran in a way its log "
                "does not show (a method other than calling the model, or a log written by "
                "hand). Call the model itself, model(ids, cache): the tests read its log"
            )


@contextmanager
def audited(*models, log: str = "batch_log"):
    """Run the block; then fail unless each model's log matches the products that really ran.
    `None` among `models` is skipped (an absent draft). `log`: "batch_log" (the ragged calls of
    the batching and serving katas, each also in `model.calls`) or "calls" (plain calls,
    `model(ids, cache)`, as speculative decoding makes them)."""
    audits = {i: _weights(m) for i, m in enumerate(models) if m is not None}
    for w in audits.values():
        w.calls, w.logged = len(w.model.calls), len(w.model.batch_log)
    with _RowCounter(list(audits.values())):
        yield
    for i, w in audits.items():
        if log == "calls":
            _check_calls(w, "the target" if i == 0 else "the draft")
        else:
            _check(w, "the model" if i == 0 else "the draft")
