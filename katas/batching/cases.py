"""The batching kata's test kit: workloads, the solo greedy oracle, and a reading of the model's
log that says, call by call, whom the implementation served, with which tokens, at which step.

Every `model.forward_batch` call is recorded in `model.batch_log` (grading/model/llama.py): for each
row, which cache it used, the position it started at and the tokens it fed. A row that starts at
position 0 begins a *segment* (one request's cache from empty); the test workloads give every
request a different first prompt token, so that token names the request. Everything the tests
check about a schedule is read from that log, not from what the implementation says it did.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st

from grading.judge.audit import audited
from grading.judge.errors import BadCall
from grading.judge.strategies import lengths, seeds
from grading.model import greedy_generate_no_cache, make_model
from grading.model.workload import WorkloadRequest

MAX_SEQ_LEN = 40  # the test model's context: prompts from 1 token to all of it stay cheap
VOCAB = 64


@functools.lru_cache(maxsize=8)
def shared_model(dtype: torch.dtype = torch.float64, vocab_size: int = VOCAB):
    """The shared tiny model with a short context, built once per dtype and vocabulary size."""
    return make_model(0, dtype, max_seq_len=MAX_SEQ_LEN, vocab_size=vocab_size)


TWIN_GAP = 2**-30  # relative: far below float32's resolution (2**-24), far above float64's


@functools.lru_cache(maxsize=1)
def near_tie_model():
    """A float64 model of 2 * VOCAB tokens whose logits come in near-tied pairs: token VOCAB + i
    is token i's twin, its output row larger by a factor 1 + TWIN_GAP. Its logit is then larger
    by about 1e-9 of it, which float64 resolves and float32 rounds away: the greedy token is
    always a twin (VOCAB..2 * VOCAB - 1), while an argmax in float32 sees a tie and takes the
    first of the pair."""
    model = make_model(0, torch.float64, max_seq_len=MAX_SEQ_LEN, vocab_size=2 * VOCAB)
    with torch.no_grad():
        head = model.lm_head.weight
        head[VOCAB:] = head[:VOCAB] * (1 + TWIN_GAP)
    return model


@functools.lru_cache(maxsize=4096)
def solo(prompt: tuple[int, ...], max_new_tokens: int, model=None) -> tuple[int, ...]:
    """The oracle: greedy decoding of one prompt alone (float64 unless `model` says otherwise),
    re-feeding the whole sequence."""
    ids = torch.tensor([prompt])
    model = shared_model(torch.float64) if model is None else model
    out = greedy_generate_no_cache(model, ids, max_new_tokens)
    return tuple(out[0, len(prompt) :].tolist())


@dataclass(frozen=True)
class StopRequest(WorkloadRequest):
    """A workload request with stop token ids (level 5): its completion ends at the first
    generated token in `stop`, that token kept."""

    stop: tuple[int, ...] = ()


def expected_tokens(spec, model=None) -> list[int]:
    """What a request's completion holds: its solo greedy decoding (on `model`, the float64
    shared model unless given), cut after the first generated token in its `stop` (if any)."""
    tokens = list(solo(tuple(spec.prompt), spec.max_new_tokens, model))
    stop = set(getattr(spec, "stop", ()))
    ends = [k for k, t in enumerate(tokens) if t in stop]
    return tokens[: ends[0] + 1] if ends else tokens


def new_tokens(spec, model=None) -> int:
    """How many tokens a request's completion has: max_new_tokens, fewer when it stops."""
    if not getattr(spec, "stop", ()):
        return spec.max_new_tokens
    return len(expected_tokens(spec, model))


LISTED_OUT_OF_ORDER = [  # the list order is not the arrival order
    WorkloadRequest(5, [1, 2, 3], 2, 3),
    WorkloadRequest(6, [6, 2], 3, 0),
    WorkloadRequest(7, [11], 1, 1),
]


def as_requests(impl, specs: list[WorkloadRequest]) -> list:
    """The workload as the implementation's Requests (with `stop` where a spec has stop ids)."""
    return [
        impl.Request(s.id, list(s.prompt), s.max_new_tokens, s.arrival, tuple(s.stop))
        if getattr(s, "stop", ())
        else impl.Request(s.id, list(s.prompt), s.max_new_tokens, s.arrival)
        for s in specs
    ]


@st.composite
def workloads(
    draw,
    max_requests: int = 6,
    max_new: int = 10,
    max_arrival: int = 12,
    max_prompt: int = MAX_SEQ_LEN,
    min_requests: int = 1,
    vocab_size: int = VOCAB,
):
    """Requests with unique ids (not in arrival order), unique first prompt tokens, prompt
    lengths from 1 to `max_prompt` (the model's maximum), max_new_tokens from 1, arrivals
    bunched or spread, tokens drawn from the whole vocabulary of `vocab_size`."""
    n = draw(st.integers(min_requests, max_requests), label="requests")
    ids = draw(st.lists(st.integers(0, 999), min_size=n, max_size=n, unique=True), label="ids")
    base = draw(st.integers(0, vocab_size - 1), label="first token")
    firsts = [(base + 5 * i) % vocab_size for i in range(n)]
    assert len(set(firsts)) == n, "5 and the vocabulary size must be coprime, or 5 * n below it"
    spread = draw(st.sampled_from([0, 3, max_arrival]), label="arrival spread")
    gen = torch.Generator().manual_seed(draw(seeds(), label="prompt seed"))
    specs = []
    for i in range(n):
        P = draw(lengths(max_prompt), label=f"prompt length {i}")
        max_new_tokens = draw(st.integers(1, min(max_new, MAX_SEQ_LEN - P + 1)), label="new")
        arrival = draw(st.integers(0, spread), label=f"arrival {i}")
        prompt = [firsts[i]] + torch.randint(0, vocab_size, (P - 1,), generator=gen).tolist()
        specs.append(WorkloadRequest(ids[i], prompt, max_new_tokens, arrival))
    order = draw(st.permutations(range(n)), label="order in the list")
    return [specs[i] for i in order]  # not in arrival order


def serve(strategy, model, *args, **kwargs):
    """Run a strategy with a fresh log; return (its completions, the log of its calls), the log
    checked against the model calls that really ran (grading/judge/audit.py)."""
    requests = args[0] if args and isinstance(args[0], list) else []
    before = [_fields(r) for r in requests]
    model.batch_log.clear()
    with audited(model):
        out = strategy(model, *args, **kwargs)
    for i, (request, fields) in enumerate(zip(requests, before, strict=True)):
        assert _fields(request) == fields, (
            f"requests[{i}] was {fields} before the call and is {_fields(request)} after it: "
            "no argument is changed in place, the requests and their prompts included (keep "
            "each request's tokens in a list of your own)"
        )
    return out, list(model.batch_log)


def _fields(request) -> tuple:
    """(id, prompt as a list, max_new_tokens, arrival, stop as a list) of a request, copied."""
    stop = list(getattr(request, "stop", ()))
    return (request.id, list(request.prompt), request.max_new_tokens, request.arrival, stop)


def check_completions(completions, specs: list[WorkloadRequest], model=None) -> None:
    """One Completion per request, in the order of `requests`, each with its solo tokens (on
    `model`, the float64 shared model unless given)."""
    assert isinstance(completions, list) and len(completions) == len(specs), (
        f"expected a list of {len(specs)} Completions (one per request), got {completions!r:.200}"
    )
    for got, spec in zip(completions, specs, strict=True):
        assert got.id == spec.id, (
            f"Completions must come back in the order of `requests`: expected id {spec.id}, "
            f"got {got.id}"
        )
        want = expected_tokens(spec, model)
        stop = tuple(getattr(spec, "stop", ()))
        stops = f", stop {stop}" if stop else ""
        assert list(got.tokens) == want, (
            f"request {spec.id} (prompt of {len(spec.prompt)} tokens, max_new_tokens "
            f"{spec.max_new_tokens}{stops}): tokens differ from decoding it alone"
            + (" up to its first stop token" if stop else "")
            + f"\n expected {want}\n got      {list(got.tokens)}\nUsually: "
            + (_stop_hint(list(got.tokens), want, spec, model) if stop else _TOKENS_HINT)
        )
        assert got.arrival == spec.arrival, f"request {spec.id}: arrival should be {spec.arrival}"


_TOKENS_HINT = (
    "a row fed at the wrong position or with the wrong tokens, a cache shared between requests, "
    "padding that took part in attention, or the next token taken from the wrong row or "
    "position of the logits"
)


def _stop_hint(got: list[int], want: list[int], spec, model) -> str:
    """What a completion that differs from its expected tokens, stop ids given, usually means."""
    stop, full = set(spec.stop), list(solo(tuple(spec.prompt), spec.max_new_tokens, model))
    if got == want[:-1] and want[-1] in stop:
        return (
            f"the stop token {want[-1]} was left out: it ends the completion and is kept as its "
            "last token (as Hugging Face generate keeps eos_token_id)"
        )
    if len(got) > len(want) and got[: len(want)] == want:
        which = "its first new token, from the prefill" if len(want) == 1 else f"token {len(want)}"
        return (
            f"the completion went on after {which}, {want[-1]}, which is a stop id: a request "
            "is done at the first generated token in its stop, whichever call produced it "
            "(the prefill's too); nothing is generated or fed for it after that"
        )
    if len(got) < len(want) and got == full[: len(got)]:
        in_prompt = sorted(stop & set(spec.prompt))
        return (
            f"the completion ended at token {len(got)}, {got[-1] if got else None}, which is no "
            "stop id"
            + (
                f"; stop ids {in_prompt} are in the prompt, and a stop id in the prompt means "
                "nothing: only generated tokens are matched"
                if in_prompt
                else ""
            )
        )
    return _TOKENS_HINT


# What the message of each of request_errors' ValueErrors must name.
REQUEST_ERROR_NAMES = {
    "empty prompt": "prompt",
    "token outside the vocabulary": "prompt|vocab_size",
    "a bool token": "prompt",
    "a float token": "prompt",
    "a tensor token": "prompt",
    "a tensor prompt": "prompt",
    "max_new_tokens below 1": "max_new_tokens",
    "negative arrival": "arrival",
    "longer than the model allows": "max_seq_len",
    "duplicate ids": "id",
}


def request_errors(call: str, run):
    """Bad requests every strategy refuses; `run(impl, requests)` calls one strategy."""
    ok = [5, 6, 7]

    def with_requests(*specs):
        return lambda impl: run(impl, [impl.Request(*s) for s in specs])

    return [
        BadCall(f"{call} with an empty prompt", "empty prompt", with_requests((1, [], 2, 0))),
        BadCall(f"{call} with token 64 in a 64-token vocabulary", "token outside the vocabulary",
                with_requests((1, [3, 64], 2, 0))),
        BadCall(f"{call} with token -1", "token outside the vocabulary",
                with_requests((1, [3, -1], 2, 0))),
        BadCall(f"{call} with token True", "a bool token", with_requests((1, [3, True], 2, 0))),
        BadCall(f"{call} with token 3.0", "a float token", with_requests((1, [3.0, 4], 2, 0))),
        BadCall(f"{call} with token torch.tensor(4)", "a tensor token",
                with_requests((1, [3, torch.tensor(4)], 2, 0))),
        BadCall(f"{call} with prompt torch.tensor([3, 4])", "a tensor prompt",
                with_requests((1, torch.tensor([3, 4]), 2, 0))),
        BadCall(f"{call} with max_new_tokens=0", "max_new_tokens below 1",
                with_requests((1, ok, 0, 0))),
        BadCall(f"{call} with arrival=-1", "negative arrival", with_requests((1, ok, 2, -1))),
        BadCall(f"{call} with prompt {MAX_SEQ_LEN} tokens + 2 new on a {MAX_SEQ_LEN}-token model",
                "longer than the model allows", with_requests((1, [1] * MAX_SEQ_LEN, 2, 0))),
        BadCall(f"{call} with two requests of id 7", "duplicate ids",
                with_requests((7, ok, 2, 0), (7, [9], 1, 3))),
    ]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Reading the log


@dataclass
class Segment:
    """One request's cache from empty: admitted at `first_call`, last fed at `last_call`."""

    request: int  # index into the workload
    first_call: int
    last_call: int
    length: list[int] = field(default_factory=list)  # cache length after each of its calls
    calls: list[int] = field(default_factory=list)


@dataclass
class Trace:
    specs: list[WorkloadRequest]
    calls: list[list[tuple[int, int, int]]]  # per call: (request, segment, tokens fed)
    segments: list[Segment]
    produced: list[dict[int, int]]  # per request: token number k (1-based) -> first call making it
    work_after_done: list[tuple[int, int]]  # (request, call): a row fed after its last token
    lengths: list[int]  # per request: tokens in its completion (fewer than max_new_tokens: stop)

    def key(self, r: int) -> tuple[int, int]:
        return (self.specs[r].arrival, r)

    def first_call(self, r: int) -> int | None:
        return self.produced[r].get(1)

    def last_call(self, r: int) -> int | None:
        return self.produced[r].get(self.lengths[r])

    def tokens(self, c: int) -> int:
        return sum(t for _, _, t in self.calls[c])

    def live(self, c: int) -> list[int]:
        """Segments holding a slot and memory at call c: from their first to their last call."""
        return [i for i, s in enumerate(self.segments) if s.first_call <= c <= s.last_call]

    def length_at(self, seg: int, c: int) -> int:
        """Cache length of a segment after its latest call <= c."""
        s = self.segments[seg]
        done = [n for call, n in zip(s.calls, s.length, strict=True) if call <= c]
        return done[-1] if done else 0

    def generated_before(self, r: int, c: int) -> int:
        return max([k for k, call in self.produced[r].items() if call < c], default=0)

    def pending(self, seg: int, c: int) -> int:
        """Tokens a segment still had to feed at call c: its prompt and every token generated
        before c, less what its cache held (nothing in the call that admits it)."""
        s = self.segments[seg]
        total = len(self.specs[s.request].prompt) + self.generated_before(s.request, c)
        return total - (self.length_at(seg, c - 1) if s.first_call < c else 0)

    def admitted(self, seg: int) -> tuple[int, tuple[int, int]]:
        """Admission order: by the call that (re-)admitted it, then first come, first served."""
        s = self.segments[seg]
        return (s.first_call, self.key(s.request))

    def rejoined(self, seg: int) -> bool:
        """The segment is a request's second or later: it follows a preemption."""
        r = self.segments[seg].request
        return any(s.request == r for s in self.segments[:seg])


def read_trace(log, specs: list[WorkloadRequest], model=None) -> Trace:
    """Who was served in each call, checking that every row fed the right tokens (those of
    decoding on `model`, the float64 shared model unless given)."""
    by_first = {s.prompt[0]: r for r, s in enumerate(specs)}
    full = [list(s.prompt) + expected_tokens(s, model) for s in specs]
    lengths = [len(f) - len(s.prompt) for f, s in zip(full, specs, strict=True)]
    open_segment: dict[int, int] = {}  # cache id -> segment
    trace = Trace(specs, [], [], [{} for _ in specs], [], lengths)
    for c, call in enumerate(log):
        rows = []
        for row in call.rows:
            if row.start == 0:
                assert row.tokens[0] in by_first, (
                    f"call {c}: a row started a cache with token {row.tokens[0]}, which begins "
                    "no prompt of the workload"
                )
                trace.segments.append(Segment(by_first[row.tokens[0]], c, c))
                open_segment[row.cache] = len(trace.segments) - 1
            assert row.cache in open_segment, (
                f"call {c}: a row continued at position {row.start} a cache that no batched "
                "call filled from position 0: serve every token, prompts included, through "
                "model.forward_batch (one call per step)"
            )
            seg = open_segment[row.cache]
            segment = trace.segments[seg]
            r, spec = segment.request, specs[segment.request]
            end = row.start + len(row.tokens)
            want = full[r][row.start : end]
            fed = list(row.tokens)
            if lengths[r] < spec.max_new_tokens:  # it stopped: past its stop token, work after done
                fed = fed[: len(want)]
            assert fed == want, (
                f"call {c}: request {spec.id} fed {list(row.tokens)} at positions "
                f"{row.start}..{end - 1}; its prompt followed by its tokens so far gives {want}"
            )
            segment.last_call = c
            segment.calls.append(c)
            segment.length.append(end)
            k = end - len(spec.prompt) + 1  # the new token this row's last position produces
            if k > lengths[r]:
                trace.work_after_done.append((r, c))
            elif k >= 1:
                trace.produced[r].setdefault(k, c)
            rows.append((r, seg, len(row.tokens)))
        trace.calls.append(rows)
    return trace


def check_clock(trace: Trace, completions, steps: list[int], rule: str) -> None:
    """The reported first_token / finished are the steps of the calls that made those tokens,
    and nothing is served before it arrives. Of several wrong events, the earliest is reported
    (served before its arrival first, at equal steps)."""
    specs, wrong = trace.specs, []  # (step, not before arrival, request, which, message)
    for r, (got, spec) in enumerate(zip(completions, specs, strict=True)):
        first, last = trace.first_call(r), trace.last_call(r)
        assert first is not None and last is not None, f"request {spec.id} never got all its tokens"
        for which, (name, call) in enumerate((("first_token", first), ("finished", last))):
            reported = getattr(got, name)
            if reported == steps[call]:
                continue
            early = isinstance(reported, int) and reported < spec.arrival
            when = min(reported, steps[call]) if isinstance(reported, int) else steps[call]
            message = _clock_message(trace, r, name, reported, call, steps, rule)
            wrong.append((when, not early, r, which, message))
    for c, rows in enumerate(trace.calls):
        for r, _, _ in rows:
            if specs[r].arrival > steps[c]:
                wrong.append((steps[c], False, r, 0, (
                    f"request {specs[r].id} arrives at step {specs[r].arrival} but was served in "
                    f"model call {c}, at step {steps[c]} ({rule}): nothing may be served before "
                    "it arrives"
                )))  # fmt: skip
    if wrong:
        raise AssertionError(min(wrong)[-1])


def _clock_message(trace: Trace, r: int, name: str, reported, call: int, steps, rule) -> str:
    spec = trace.specs[r]
    rejoins = [s.first_call for i, s in enumerate(trace.segments) if s.request == r][1:]
    if isinstance(reported, int) and reported < spec.arrival:
        return (
            f"request {spec.id} reports {name} = {reported}, before its arrival at step "
            f"{spec.arrival}; its token came out of model call {call}, step {steps[call]} "
            f"({rule}): nothing may be served before it arrives"
        )
    if name == "first_token" and rejoins and reported != steps[call]:
        return (
            f"request {spec.id}: first_token = {reported}, but its first token first came out at "
            f"step {steps[call]}; it was preempted and rejoined at step {steps[rejoins[0]]}. A "
            "request keeps its tokens and its first_token across a preemption: the recompute "
            "feeds them again but produces no first token"
        )
    return (
        f"request {spec.id}: {name} = {reported}, but that token came out of model call {call}, "
        f"which is step {steps[call]} ({rule})"
    )


# ----------------------------------------------------------------------------------------------
# Static and dynamic batching: the plan is fixed by the rules, so the test derives it


@dataclass(frozen=True)
class Group:
    members: tuple[int, ...]  # indices into the workload
    start: int  # the step of its first call
    steps: int  # how many steps it runs: its longest completion (max_new_tokens, or to a stop)


def arrival_order(specs: list[WorkloadRequest]) -> list[int]:
    return sorted(range(len(specs)), key=lambda r: (specs[r].arrival, r))


def static_plan(specs, batch_size: int, model=None) -> list[Group]:
    """The static groups; a group runs until every member is done (`model` decides where
    requests with stop ids stop: the float64 shared model unless given)."""
    lengths = [new_tokens(s, model) for s in specs]
    order, groups, free = arrival_order(specs), [], 0
    for i in range(0, len(order), batch_size):
        members = tuple(order[i : i + batch_size])
        start = max(free, max(specs[r].arrival for r in members))
        groups.append(Group(members, start, max(lengths[r] for r in members)))
        free = start + groups[-1].steps
    return groups


def dynamic_plan(specs, max_batch_size: int, max_wait: int, model=None) -> list[Group]:
    """The dynamic batches, each run like a static group."""
    lengths = [new_tokens(s, model) for s in specs]
    order, groups, step, served = arrival_order(specs), [], 0, 0
    while served < len(order):
        waiting = [r for r in order[served:] if specs[r].arrival <= step]
        if len(waiting) >= max_batch_size or (
            waiting and step - specs[waiting[0]].arrival >= max_wait
        ):
            members = tuple(waiting[:max_batch_size])
            groups.append(Group(members, step, max(lengths[r] for r in members)))
            served += len(members)
            step += groups[-1].steps
        else:
            step += 1
    return groups


def check_fixed_batches(trace: Trace, completions, groups: list[Group], rule: str) -> None:
    """Each group's calls serve only its unfinished members, one call per step, from its start
    step until every member is done."""
    specs, steps, owner = trace.specs, [], {}
    for g, group in enumerate(groups):
        steps += range(group.start, group.start + group.steps)
        owner.update({c: g for c in range(len(steps) - group.steps, len(steps))})
    plan = [[specs[r].id for r in g.members] for g in groups]
    stops = any(trace.lengths[r] < s.max_new_tokens for r, s in enumerate(specs))
    assert len(trace.calls) == len(steps), (
        f"expected {len(steps)} model calls (one per step while a batch runs; batches by "
        f"request id: {plan}, starting at steps {[g.start for g in groups]}), got "
        f"{len(trace.calls)}"
        + (
            ". A batch runs until every member is done, and a member is done when it has "
            "max_new_tokens tokens or has produced a stop token: the batch of longest completion "
            f"n runs n steps (completions here: {_lengths_by_id(trace)})"
            if stops
            else ""
        )
    )
    for c, rows in enumerate(trace.calls):
        group = groups[owner[c]]
        for r, _, _ in rows:
            assert r in group.members, (
                f"model call {c} (step {steps[c]}) served request {specs[r].id}, but at that step "
                f"the batch {[specs[m].id for m in group.members]} runs ({rule}); "
                f"the batches by request id should be {plan}"
            )
    for group in groups:
        first = steps.index(group.start)
        for r in group.members:
            assert trace.first_call(r) == first, (
                f"request {specs[r].id}: its first token should come from the batch's first call "
                f"(step {group.start}), which feeds every member's whole prompt"
            )
            last, n = trace.last_call(r), trace.lengths[r]
            assert last == first + n - 1, (
                f"request {specs[r].id}: one new token per step after the prefill: its last "
                f"should come out at step {group.start + n - 1}"
                + (f" (its completion ends at a stop token, token {n})" if stops else "")
            )
    check_no_work_after_done(trace, steps)
    if stops:
        _check_groups_start_after_stops(trace, completions, groups)
    check_clock(trace, completions, steps, rule)


def _check_groups_start_after_stops(trace: Trace, completions, groups: list[Group]) -> None:
    """With stop ids: a batch reported starting later than planned, right after a batch that
    started on time and whose members stopped early, ran its predecessor too long (to
    max_new_tokens instead of to its stops)."""
    specs = trace.specs
    for before, group in zip(groups, groups[1:], strict=False):
        ended, members = before.start + before.steps, before.members
        on_time = all(completions[m].first_token == before.start for m in members)
        stopped = any(trace.lengths[m] < specs[m].max_new_tokens for m in members)
        if group.start != ended or not on_time or not stopped:
            continue
        for r in group.members:
            reported = completions[r].first_token
            if isinstance(reported, int) and reported > group.start:
                lengths = [trace.lengths[m] for m in members]
                raise AssertionError(
                    f"request {specs[r].id}: first_token = {reported}, but its batch starts at "
                    f"step {group.start}: the batch before it, {[specs[m].id for m in members]}, "
                    f"ran steps {before.start}..{ended - 1} and was done then, each member done "
                    f"at max_new_tokens or at its first stop token (completions of {lengths} "
                    f"tokens; max_new_tokens {[specs[m].max_new_tokens for m in members]}). A "
                    "batch runs until every member is done, not for max(max_new_tokens) steps"
                )


def check_joins_after_a_stop(trace: Trace, completions, steps: list[int]) -> None:
    """A request that stops frees its slot and blocks in that step: a request the implementation
    reports joining later than the calls show, right after a stop, waited a step for them.
    (Only sharpens what check_clock finds: it fails nothing check_clock passes.)"""
    specs = trace.specs
    stopped = {
        steps[trace.last_call(r)]: r
        for r in range(len(specs))
        if trace.lengths[r] < specs[r].max_new_tokens and trace.last_call(r) is not None
    }
    for r, got in enumerate(completions):
        c = trace.first_call(r)
        if c is None or not isinstance(got.first_token, int) or got.first_token <= steps[c]:
            continue
        if steps[c] - 1 in stopped:
            done = stopped[steps[c] - 1]
            raise AssertionError(
                f"request {specs[r].id}: first_token = {got.first_token}, but it joined in model "
                f"call {c}, at step {steps[c]} (no step passes idle while somebody waits): in "
                f"step {steps[c] - 1} request {specs[done].id} produced a token of its stop "
                f"{tuple(specs[done].stop)} and was done. A request that stops leaves in that "
                "step, its slot and all its KV blocks free at once, so a waiting request that "
                "fits in them joins in the next step, not a step later"
            )


def _lengths_by_id(trace: Trace) -> dict[int, int]:
    return {s.id: n for s, n in zip(trace.specs, trace.lengths, strict=True)}


# ----------------------------------------------------------------------------------------------
# Continuous batching: properties of what was done


def continuous_steps(trace: Trace) -> list[int]:
    """The step of each call: consecutive while anyone has arrived and is unfinished; when the
    system empties, the clock skips to the next arrival."""
    specs, steps = trace.specs, []
    for c in range(len(trace.calls)):
        if not steps:
            steps.append(min(s.arrival for s in specs))
            continue
        prev = steps[-1]
        unfinished = [
            r for r in range(len(specs)) if (trace.last_call(r) is None or trace.last_call(r) >= c)
        ]
        busy = any(specs[r].arrival <= prev for r in unfinished)
        soonest = min((specs[r].arrival for r in unfinished), default=prev + 1)
        steps.append(prev + 1 if busy else max(prev + 1, soonest))
    return steps


@dataclass(frozen=True)
class Limits:
    max_batch_size: int
    max_tokens_per_step: int | None = None
    kv_blocks: int | None = None
    block_size: int = 16

    @property
    def budget(self) -> float:
        return math.inf if self.max_tokens_per_step is None else self.max_tokens_per_step

    def blocks(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def used(self, trace: Trace, c: int) -> int:
        """Blocks held at call c by every segment holding memory then."""
        return sum(self.blocks(trace.length_at(seg, c)) for seg in trace.live(c))


def waiting(trace: Trace, steps: list[int], c: int) -> list[int]:
    """Requests that have arrived by call c, are unfinished, and hold no slot (oldest first)."""
    live = {trace.segments[seg].request for seg in trace.live(c)}
    found = [
        r
        for r, spec in enumerate(trace.specs)
        if spec.arrival <= steps[c]
        and (trace.last_call(r) is None or trace.last_call(r) >= c)
        and r not in live
    ]
    return sorted(found, key=trace.key)


def check_limits(trace: Trace, steps: list[int], limits: Limits) -> None:
    for c in range(len(trace.calls)):
        running = trace.live(c)
        assert len(running) <= limits.max_batch_size, (
            f"step {steps[c]}: {len(running)} requests hold a slot (requests "
            f"{sorted(trace.specs[trace.segments[s].request].id for s in running)}), more than "
            f"max_batch_size = {limits.max_batch_size}"
        )
        assert trace.tokens(c) <= limits.budget, (
            f"step {steps[c]}: the model call fed {trace.tokens(c)} new tokens, more than "
            f"max_tokens_per_step = {limits.max_tokens_per_step}: prefill long prompts in chunks"
        )
        if limits.kv_blocks is not None:
            used = limits.used(trace, c)
            assert used <= limits.kv_blocks, (
                f"step {steps[c]}: the requests holding KV memory need {used} blocks of "
                f"{limits.block_size} tokens, more than kv_blocks = {limits.kv_blocks}: admit a "
                "request only when its blocks are free, and preempt when a step needs more"
            )


def check_no_slot_left_empty(trace: Trace, steps: list[int], limits: Limits) -> None:
    """While somebody waits, every step is full: of requests, of tokens, or of memory."""
    specs = trace.specs
    for c in range(len(trace.calls)):
        left = limits.budget - trace.tokens(c)
        unused = "no token budget" if math.isinf(left) else f"{left} tokens of its budget unused"
        in_call = {seg: t for _, seg, t in trace.calls[c]}
        for seg in trace.live(c):
            r, pending = trace.segments[seg].request, trace.pending(seg, c)
            assert left == 0 or in_call.get(seg, 0) == pending, (
                f"step {steps[c]}: request {specs[r].id} was fed {in_call.get(seg, 0)} of its "
                f"{pending} pending tokens in a call with {unused}"
            )
        queue = waiting(trace, steps, c)
        if not queue or left == 0 or len(trace.live(c)) >= limits.max_batch_size:
            continue
        head = queue[0]
        chunk = min(len(specs[head].prompt) + trace.generated_before(head, c), left)
        free = math.inf if limits.kv_blocks is None else limits.kv_blocks - limits.used(trace, c)
        victims = [specs[r].id for r in preempted_before(trace, c)]
        assert limits.blocks(chunk) > free, (
            f"step {steps[c]}: request {specs[head].id} (arrived at step {specs[head].arrival}) "
            f"waited while a slot ({len(trace.live(c))} of {limits.max_batch_size} taken), "
            f"{left} tokens of budget and {free} free blocks could have taken it; arrived "
            "requests join free slots at once"
            + (
                f". Request(s) {victims} were preempted in this step: the blocks a preemption "
                "frees are free for the queue in that same step (the victim's own rejoin "
                "included), so admission still runs after a preemption"
                if victims
                else ""
            )
        )


def preempted_before(trace: Trace, c: int) -> list[int]:
    """Requests whose cache was last fed at call c - 1 though they had tokens to come: in a call
    c with budget left (no running request skipped), they were preempted in its scheduling."""
    unfinished = [s for s in trace.segments if s.last_call == c - 1]
    return [s.request for s in unfinished if (trace.last_call(s.request) or 0) > c - 1]


def check_first_come_first_served(trace: Trace, steps: list[int]) -> None:
    for segment in trace.segments:
        c, r = segment.first_call, segment.request
        earlier = [w for w in waiting(trace, steps, c) if trace.key(w) < trace.key(r)]
        assert not earlier, (
            f"step {steps[c]}: request {trace.specs[r].id} (arrival {trace.specs[r].arrival}) "
            f"joined while request {trace.specs[earlier[0]].id} (arrival "
            f"{trace.specs[earlier[0]].arrival}) waited: first come, first served"
        )


def check_oldest_admitted_first(trace: Trace, steps: list[int], limits: Limits) -> None:
    """Each call hands out its budget in admission order: the running requests oldest admitted
    first, then those that join, each taking min(its pending tokens, the budget left)."""
    specs = trace.specs
    for c in range(len(trace.calls)):
        fed = {seg: t for _, seg, t in trace.calls[c]}
        order = sorted(trace.live(c), key=trace.admitted)
        left = limits.budget
        for i, seg in enumerate(order):
            r, pending, got = trace.segments[seg].request, trace.pending(seg, c), fed.get(seg, 0)
            want = min(pending, left)
            later = [o for o in order[i + 1 :] if fed.get(o, 0)]
            assert got == want or not later, (
                f"step {steps[c]}: request {specs[r].id} (admitted at step "
                f"{steps[trace.segments[seg].first_call]}) was fed {got} of its {pending} pending "
                f"tokens while request {specs[trace.segments[later[0]].request].id}, admitted "
                f"after it (at step {steps[trace.segments[later[0]].first_call]}), was fed "
                f"{fed[later[0]]}: with max_tokens_per_step = {limits.max_tokens_per_step} the "
                "budget goes to the running requests oldest admitted first (a re-admission counts "
                "from its step), each taking min(its pending tokens, the budget left)"
            )
            assert got == want, (
                f"step {steps[c]}: request {specs[r].id} was fed {got} tokens; it had {pending} "
                f"pending and {left} of the budget was left, so min(pending, budget left) = {want}"
            )
            left -= got


def check_rejoins_keep_their_tokens(trace: Trace, steps: list[int], limits: Limits) -> None:
    """A preempted request rejoins with its prompt and every token it had generated, fed as a
    prefill (chunked like any other), not replayed one decode step at a time."""
    specs = trace.specs
    for seg, segment in enumerate(trace.segments):
        if not trace.rejoined(seg):
            continue
        r, c0 = segment.request, segment.first_call
        had = trace.generated_before(r, c0)
        need = len(specs[r].prompt) + had
        for c, length in zip(segment.calls, segment.length, strict=True):
            fed = length - trace.length_at(seg, c - 1) if c > c0 else length
            left = limits.budget - trace.tokens(c)
            assert length >= need or left == 0, (
                f"step {steps[c]}: request {specs[r].id}, preempted after generating {had} "
                f"tokens, rejoined at step {steps[c0]} and was fed {fed} tokens, up to position "
                f"{length - 1}, while the step had budget left: a request keeps its tokens and "
                "its first_token across a preemption; when it rejoins it feeds its prompt and "
                f"every token it had generated ({need} tokens, as a prefill) and carries on from "
                "there, instead of starting again from its prompt"
            )
            if length >= need:
                break


def preemptions(trace: Trace, limits: Limits) -> list[tuple[int, int]]:
    """(segment, call) for every segment surely preempted at that call: unfinished, absent from
    the call after its last, while that call had budget left (so nothing was skipped)."""
    found = []
    for seg, segment in enumerate(trace.segments):
        c, r = segment.last_call + 1, segment.request
        if trace.last_call(r) is not None and trace.last_call(r) <= segment.last_call:
            continue  # it finished
        if c < len(trace.calls) and trace.tokens(c) < limits.budget:
            found.append((seg, c))
    return found


def check_preemption(trace: Trace, steps: list[int], limits: Limits) -> None:
    """Only when memory runs out, and always the most recently admitted request."""
    specs = trace.specs
    if limits.kv_blocks is None:
        assert not preemptions(trace, limits), "without kv_blocks nothing is ever preempted"
        return
    for seg, c in preemptions(trace, limits):
        victim = trace.segments[seg]
        oldest_victim = min(
            (trace.segments[s].first_call, trace.key(trace.segments[s].request))
            for s, at in preemptions(trace, limits)
            if at == c
        )
        admitted = (victim.first_call, trace.key(victim.request))
        for other in trace.live(c):
            o = trace.segments[other]
            assert o.first_call == c or (o.first_call, trace.key(o.request)) < admitted, (
                f"step {steps[c]}: request {specs[victim.request].id} was preempted while "
                f"request {specs[o.request].id}, admitted after it, kept running: preempt the "
                "most recently admitted request"
            )
        r, length = victim.request, victim.length[-1]
        decoding = length == len(specs[r].prompt) + trace.generated_before(r, c) - 1
        if not decoding or (victim.first_call, trace.key(r)) != oldest_victim:
            continue  # only the last victim taken had to be; a prefill's next chunk is unknown
        held = limits.blocks(length)
        # The requests that ran on from an earlier step, at their sizes after this call: a request
        # joining in this step (the victim's own rejoin too) took its blocks after the preemption.
        kept = [s for s in trace.live(c) if trace.segments[s].first_call < c]
        needed = sum(limits.blocks(trace.length_at(s, c)) for s in kept) + limits.blocks(length + 1)
        assert needed > limits.kv_blocks, (
            f"step {steps[c]}: request {specs[r].id} was preempted, yet it could have kept its "
            f"{held} blocks and decoded: with the {len(kept)} request(s) that ran on, "
            f"{needed} blocks of {limits.kv_blocks} would be in use, which fits. Preempt only "
            "when a step's tokens need a block and none is free: needing exactly the free "
            "blocks is fitting"
        )


def check_no_work_after_done(trace: Trace, steps: list[int]) -> None:
    if trace.work_after_done:
        r, c = trace.work_after_done[0]
        spec, n = trace.specs[r], trace.lengths[r]
        why = f"max_new_tokens = {spec.max_new_tokens}"
        if n < spec.max_new_tokens:
            why = f"token {n} is a stop id of {tuple(spec.stop)}, so it was done there"
        raise AssertionError(
            f"step {steps[c]}: request {spec.id} was fed again after its last token ({why}): "
            "a finished request, one with max_new_tokens tokens or whose newest token is a stop "
            "id, is fed no more: it leaves the batch in the step its last token comes out"
        )


def ideal_tokens(specs: list[WorkloadRequest]) -> int:
    """Tokens through the model when each prompt token and each fed-back token goes once."""
    return sum(len(s.prompt) + s.max_new_tokens - 1 for s in specs)


def recomputed_tokens(trace: Trace) -> int:
    """Tokens fed twice because of preemption: everything a preempted request had cached."""
    later = set()
    lost = 0
    for segment in reversed(trace.segments):
        if segment.request in later:
            lost += segment.length[-1]
        later.add(segment.request)
    return lost


def ideal_flops(config, specs: list[WorkloadRequest], recompute: list[int] = ()) -> int:
    """FLOPs of each request's prompt through the model once (one prefill) and each fed-back
    token once (one decode step each), plus a prefill of every length in `recompute`.

    Per token, every layer multiplies it through wq, wk, wv, wo and the MLP, then lm_head: 2
    FLOPs per weight. Attention of q queries over k keys costs 4·H·hd·q·k per layer.
    """
    c = config
    weights = c.dim * (c.n_heads + 2 * c.n_kv_heads) * c.head_dim + c.n_heads * c.head_dim * c.dim
    per_token = 2 * (c.n_layers * (weights + 3 * c.dim * c.hidden_dim) + c.dim * c.vocab_size)

    def prefill(n: int) -> int:
        return n * per_token + c.n_layers * 4 * c.n_heads * c.head_dim * n * n

    def decode(keys: int) -> int:
        return per_token + c.n_layers * 4 * c.n_heads * c.head_dim * keys

    total = sum(prefill(n) for n in recompute)
    for s in specs:
        P = len(s.prompt)
        total += prefill(P) + sum(decode(P + i) for i in range(1, s.max_new_tokens))
    return total


# ----------------------------------------------------------------------------------------------
# What every strategy must serve: the whole schedule checked, strategy by strategy

EVERY_STRATEGY = ("static_batching", "dynamic_batching", "continuous_batching")
MAX_WAIT = 2  # dynamic batching's, where every strategy serves one workload


def check_schedule(strategy: str, out, log, specs, model, batch_size: int) -> None:
    """A strategy's tokens (decoding alone on `model`) and its schedule, as its rules define."""
    check_completions(out, specs, model)
    trace = read_trace(log, specs, model)
    if strategy == "static_batching":
        rule = "static: groups of batch_size in arrival order, each starting when its last member "
        rule += "has arrived and the previous group is done"
        check_fixed_batches(trace, out, static_plan(specs, batch_size, model), rule)
    elif strategy == "dynamic_batching":
        rule = f"dynamic: a batch starts as soon as {batch_size} requests wait or the oldest has "
        rule += f"waited {MAX_WAIT} steps"
        check_fixed_batches(trace, out, dynamic_plan(specs, batch_size, MAX_WAIT, model), rule)
    else:
        steps, limits = continuous_steps(trace), Limits(batch_size)
        check_no_work_after_done(trace, steps)
        check_clock(trace, out, steps, "the clock skips steps only while nobody waits or runs")
        check_limits(trace, steps, limits)
        check_no_slot_left_empty(trace, steps, limits)
        check_first_come_first_served(trace, steps)
        check_preemption(trace, steps, limits)


def serve_every_strategy(
    impl, specs: list[WorkloadRequest], model, batch_size: int, why: str
) -> None:
    """Serve `specs` on `model` with each strategy written so far (static_batching first; a later
    level not written yet is skipped), at `batch_size` (dynamic batching: max_wait = MAX_WAIT),
    and check each one's tokens and schedule; a failure names the strategy and says `why` the
    workload is drawn so."""
    for strategy in EVERY_STRATEGY:
        args = (batch_size, MAX_WAIT) if strategy == "dynamic_batching" else (batch_size,)
        try:
            out, log = serve(getattr(impl, strategy), model, as_requests(impl, specs), *args)
        except NotImplementedError:
            if strategy == "static_batching":
                raise
            continue  # a later level, not written yet
        try:
            check_schedule(strategy, out, log, specs, model, batch_size)
        except AssertionError as exc:
            raise AssertionError(f"{strategy}: {exc}\nThis workload: {why}") from None
