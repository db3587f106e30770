"""The serving kata's test kit: the models, workloads, the solo oracle, and readings of the
model's own log (which rows each call fed, at which positions) that the checks rely on.

Every `model.forward_packed` call is logged by the model itself in `model.batch_log` (rows, each
with its start position and the tokens fed) and `model.calls`. What the tests say about a
schedule (rows per call, tokens fed, KV blocks in use, FLOPs of the ideal) is read from there,
not from what the implementation reports.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from grading.judge.audit import audited
from grading.model import greedy_generate_no_cache, make_model
from grading.model.workload import WorkloadRequest, poisson_workload
from katas.batching.cases import MAX_SEQ_LEN, VOCAB, workloads  # noqa: F401 - shared kit

MOE = dict(n_experts=8, top_k=2, max_seq_len=MAX_SEQ_LEN, vocab_size=VOCAB)


@functools.lru_cache(maxsize=4)
def target(dtype: torch.dtype = torch.float64):
    """The served model: the shared tiny Llama with 8 experts, 2 per token, in every block."""
    return make_model(0, dtype, **MOE)


DRAFTS = ["agreeing", "close", "weak", "small"]


@functools.lru_cache(maxsize=8)
def draft(kind: str, dtype: torch.dtype = torch.float64):
    """`agreeing`: a second copy of the target (proposes what the target would pick); `close`:
    a copy whose output head is perturbed (agrees about two times in three); `weak`: a one-layer
    dense model of another seed (rarely agrees); `small`: a two-expert mixture of another seed
    and shape."""
    if kind in ("agreeing", "close"):
        model = make_model(0, torch.float64, **MOE)
        if kind == "close":
            gen = torch.Generator().manual_seed(5)
            head = model.lm_head.weight
            with torch.no_grad():
                head += 0.3 * head.std() * torch.randn(head.shape, generator=gen, dtype=head.dtype)
        return model.to(dtype)
    if kind == "weak":
        return make_model(1, dtype, n_layers=1, max_seq_len=MAX_SEQ_LEN, vocab_size=VOCAB)
    return make_model(
        2, dtype, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=8, n_experts=2, top_k=1,
        max_seq_len=MAX_SEQ_LEN, vocab_size=VOCAB,
    )  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _decoded(prompt: tuple[int, ...]) -> list[int]:
    """The greedy tokens of `prompt` decoded so far; `solo` extends them as needed."""
    return []


def solo(prompt: tuple[int, ...], max_new_tokens: int) -> tuple[int, ...]:
    """The oracle: what naive_serve gives one request (float64, no cache, every expert). Greedy
    tokens for n are the first n of those for more, so each prompt is decoded once, as far as
    asked (level 4 asks for several lengths of one prompt)."""
    done = _decoded(prompt)
    if len(done) < max_new_tokens:
        ids = torch.tensor([list(prompt) + done])
        out = greedy_generate_no_cache(target(torch.float64), ids, max_new_tokens - len(done))
        done[:] = out[0, len(prompt) :].tolist()
    return tuple(done[:max_new_tokens])


@dataclass(frozen=True)
class Round:
    """One speculative round of one request alone."""

    committed: int  # L: its tokens (prompt + generated) when the round starts
    proposals: tuple[int, ...]  # the draft's greedy proposals from the true context
    kept: int  # j: how many of them match the target's own tokens
    draft_cached: int  # tokens the draft holds when the round starts, rolled back exactly


@functools.lru_cache(maxsize=4096)
def solo_rounds(
    kind: str | None, prompt: tuple[int, ...], max_new_tokens: int, k: int
) -> tuple[Round, ...]:
    """Speculative decoding of one request alone: each round the draft proposes min(k, tokens
    still needed - 1) greedy tokens from the true context (no cache), and the longest prefix
    matching the target's own tokens is kept, plus one of the target's. Without a draft
    (`kind=None`) every round proposes nothing. Preemption never changes these rounds: it falls
    between them."""
    want = solo(prompt, max_new_tokens)
    done, cached, out = 0, 0, []
    while done < max_new_tokens:
        context = list(prompt) + list(want[:done])
        proposals = []
        for _ in range(0 if kind is None else min(k, max_new_tokens - done - 1)):
            ids = torch.tensor([context + proposals])
            with torch.no_grad():
                proposals.append(int(draft(kind)(ids)[0, -1].argmax()))
        kept = 0
        while kept < len(proposals) and proposals[kept] == want[done + kept]:
            kept += 1
        out.append(Round(len(context), tuple(proposals), kept, cached))
        if proposals:  # the draft read the context and all but its last proposal
            cached = len(context) + min(len(proposals) - 1, kept)
        done += kept + 1
    return tuple(out)


def rounds(kind: str, prompt: tuple[int, ...], max_new_tokens: int, k: int) -> int:
    """Steps speculative decoding needs for one request alone."""
    return len(solo_rounds(kind, prompt, max_new_tokens, k))


def as_requests(impl, specs: list[WorkloadRequest], stops: list | None = None) -> list:
    """The requests of `specs`; given `stops` (level 4), request i with `stop=stops[i]`."""
    if stops is None:
        return [impl.Request(s.id, list(s.prompt), s.max_new_tokens, s.arrival) for s in specs]
    return [
        impl.Request(s.id, list(s.prompt), s.max_new_tokens, s.arrival, stop=stop)
        for s, stop in zip(specs, stops, strict=True)
    ]


def blocks_alone(specs: list[WorkloadRequest], block_size: int) -> int:
    """The most blocks any one request needs: ceil((len(prompt) + max_new_tokens - 1) / bs)."""
    return max(math.ceil((len(s.prompt) + s.max_new_tokens - 1) / block_size) for s in specs)


@st.composite
def budgets(draw, specs: list[WorkloadRequest]):
    """(block_size, kv_blocks): sizes from 1 token to past a prompt; no limit, or a pool from
    exactly what the largest request needs alone to a few blocks more."""
    block_size = draw(st.sampled_from([1, 2, 3, 4, 5, 16]), label="block_size")
    tight = draw(st.one_of(st.none(), st.integers(0, 3)), label="blocks beyond the largest")
    return block_size, None if tight is None else blocks_alone(specs, block_size) + tight


def chat_workload(n: int = 32, seed: int = 0) -> list[WorkloadRequest]:
    """The cost tests' workload: n chat-like requests arriving over the first few steps."""
    return poisson_workload(n, rate=8.0, seed=seed, vocab_size=VOCAB, max_seq_len=MAX_SEQ_LEN)


def run(fn, model, requests, **kwargs):
    """Call `fn(model, requests, **kwargs)` with fresh logs (the target's and the draft's);
    return (completions, the target's batch_log). Both logs are checked against the model calls
    that really ran (grading/judge/audit.py)."""
    for m in (model, kwargs.get("draft") or model):
        m.calls.clear()
        m.batch_log.clear()
    with audited(model, kwargs.get("draft")):
        out = fn(model, requests, **kwargs)
    return out, list(model.batch_log)


# ----------------------------------------------------------------------------------------------
# Checks


def busy_steps(completions) -> int:
    """Steps in which some request was between its arrival and its last token."""
    return len({t for c in completions for t in range(c.arrival, c.finished + 1)})


def check_completions(completions, specs: list[WorkloadRequest]) -> None:
    """One Completion per request, in the order of `requests`, each with naive_serve's tokens."""
    assert isinstance(completions, list) and len(completions) == len(specs), (
        f"expected a list of {len(specs)} Completions (one per request), got {completions!r:.200}"
    )
    for got, spec in zip(completions, specs, strict=True):
        assert got.id == spec.id, (
            f"Completions must come back in the order of `requests`: expected id {spec.id}, "
            f"got {got.id}"
        )
        want = list(solo(tuple(spec.prompt), spec.max_new_tokens))
        assert list(got.tokens) == want, (
            f"request {spec.id} (prompt of {len(spec.prompt)} tokens, max_new_tokens "
            f"{spec.max_new_tokens}): tokens differ from naive_serve's\n expected {want}\n"
            f" got      {list(got.tokens)}\nUsually: keys written to the wrong block or offset, a "
            "block handed to two sequences, RoPE at the wrong position, a row attending to "
            "another row's keys, a query head reading the wrong key/value head (under "
            "grouped-query attention query head h reads kv head h // (n_heads // n_kv_heads); "
            "h % n_kv_heads is the usual slip), tokens routed to the wrong experts, or a rollback "
            "that kept a rejected proposal's keys"
        )
        assert got.arrival == spec.arrival, f"request {spec.id}: arrival should be {spec.arrival}"
        assert spec.arrival <= got.first_token <= got.finished, (
            f"request {spec.id}: expected arrival {spec.arrival} <= first_token <= finished, got "
            f"first_token {got.first_token}, finished {got.finished}: a request is served only "
            "from its arrival step on, and its first token comes no later than its last"
        )


def check_memory(log, max_batch_size: int, kv_blocks: int | None, block_size: int) -> None:
    """No call has more than max_batch_size rows, or rows whose keys need more than kv_blocks."""
    for c, call in enumerate(log):
        assert len(call.rows) <= max_batch_size, (
            f"call {c} fed {len(call.rows)} rows, but max_batch_size is {max_batch_size}"
        )
        if kv_blocks is None:
            continue
        held = sum(math.ceil((row.start + len(row.tokens)) / block_size) for row in call.rows)
        assert held <= kv_blocks, (
            f"call {c}: its rows reach positions that need {held} blocks of {block_size} tokens "
            f"at once (ceil((start + fed) / block_size) per row), but kv_blocks is {kv_blocks}: "
            "a block was promised twice, or a request ran without its blocks"
        )


def ideal_tokens(specs: list[WorkloadRequest]) -> int:
    """Tokens the target must read without a draft: every prompt token and every new token but
    the last, each once."""
    return sum(len(s.prompt) + s.max_new_tokens - 1 for s in specs)


def ideal_flops(model, log) -> int:
    """FLOPs of the matrix products the logged calls need at the least: each token through every
    projection, its top_k experts (not all of them) and the head; each row's queries against the
    keys up to its own position."""
    c = model.config
    dim, hd, H, Hkv = c.dim, c.head_dim, c.n_heads, c.n_kv_heads
    per_token = 2 * dim * (H + 2 * Hkv) * hd + 2 * H * hd * dim  # q, k, v and o projections
    if c.n_experts:
        per_token += 2 * dim * c.n_experts + c.top_k * 3 * 2 * dim * c.hidden_dim
    else:
        per_token += 3 * 2 * dim * c.hidden_dim
    total = 0
    for call in log:
        for row in call.rows:
            T, L = len(row.tokens), row.start + len(row.tokens)
            total += c.n_layers * (T * per_token + 2 * 2 * H * hd * T * L)
            total += T * 2 * dim * c.vocab_size  # the head
    return total


def naive_flops(model, specs: list[WorkloadRequest]) -> int:
    """FLOPs of naive_serve's products: every step re-feeds the sequence, every expert runs."""
    c = model.config
    dim, hd, H, Hkv = c.dim, c.head_dim, c.n_heads, c.n_kv_heads
    per_token = 2 * dim * (H + 2 * Hkv) * hd + 2 * H * hd * dim
    per_token += 2 * dim * c.n_experts + c.n_experts * 3 * 2 * dim * c.hidden_dim
    total = 0
    for s in specs:
        for L in range(len(s.prompt), len(s.prompt) + s.max_new_tokens):
            total += c.n_layers * (L * per_token + 2 * 2 * H * hd * L * L)
            total += L * 2 * dim * c.vocab_size
    return total


# ----------------------------------------------------------------------------------------------
# What each model reads: exactly the committed tokens once, the rejected proposals, and what a
# preemption makes it recompute


def _admissions(log, specs, kind, k) -> list[tuple[int, int, int]]:
    """(call, request, round) of every row that starts a request's memory from position 0: the
    row feeds the request's committed tokens (then, for the target, the round's proposals)."""
    by_first = {spec.prompt[0]: r for r, spec in enumerate(specs)}  # distinct first tokens
    found = []
    for c, call in enumerate(log):
        for row in (row for row in call.rows if row.start == 0):
            r = by_first.get(row.tokens[0])
            assert r is not None, f"call {c}: a row starts with {row.tokens[0]}, no prompt's first"
            spec = specs[r]
            full = list(spec.prompt) + list(solo(tuple(spec.prompt), spec.max_new_tokens))
            plan = solo_rounds(kind, tuple(spec.prompt), spec.max_new_tokens, k)
            fits = [
                i for i, rd in enumerate(plan)
                if list(row.tokens) in (full[: rd.committed] + list(rd.proposals),
                                        full[: rd.committed])
            ]  # fmt: skip
            assert fits, (
                f"call {c}: request {spec.id} starts again from position 0 with "
                f"{list(row.tokens)}; a request (re)joins with its prompt and every token it has "
                "generated, followed by the round's proposals"
            )
            found.append((c, r, fits[-1]))
    return found


def check_reads(model, draft_model, kind, k, specs) -> None:
    """Each model reads every committed token once between preemptions, plus the proposals it
    is given that are then rejected, plus, after a preemption, everything it had cached."""
    target_log = list(model.batch_log)
    plans = [solo_rounds(kind, tuple(s.prompt), s.max_new_tokens, k) for s in specs]
    rejoins = Counter()  # (request, round) of each target admission
    recompute = 0
    for _, r, i in _admissions(target_log, specs, kind, k):
        rejoins[r, i] += 1
        recompute += plans[r][i].committed - 1 if i else 0
    rejected = sum(len(rd.proposals) - rd.kept for plan in plans for rd in plan)
    want = ideal_tokens(specs) + rejected + recompute
    fed = sum(call.new_tokens for call in target_log)
    assert fed == want, (
        f"the target read {fed} tokens; it must read each committed token once "
        f"({ideal_tokens(specs)}), the {rejected} proposals it rejects and the {recompute} it "
        f"had cached when preempted: {want}. More: its memory rolled back past the rejected "
        "proposals (the accepted ones' keys are kept), or a recompute fed more; fewer: it kept "
        "keys of rejected proposals"
    )
    if draft_model is None:
        return
    draft_log = list(draft_model.batch_log)
    want = recompute = 0
    for plan in plans:
        for rd in plan:
            if rd.proposals:  # unread committed tokens, then all but the last proposal
                want += rd.committed - rd.draft_cached + len(rd.proposals) - 1
    restarts = Counter((r, i) for _, r, i in _admissions(draft_log, specs, kind, k))
    for (r, i), times in restarts.items():
        extra = times - rejoins[r, i]
        assert extra <= 0, (
            f"the draft started request {specs[r].id} again from position 0 in its round {i + 1} "
            "with no preemption there: roll the draft back only past the rejected proposals"
        )
        recompute += times * plans[r][i].draft_cached
    want += recompute
    fed = sum(call.new_tokens for call in draft_log)
    assert fed == want, (
        f"the draft read {fed} tokens; rolled back exactly it reads each committed token once, "
        f"plus every proposal but a round's last, plus {recompute} recomputed after "
        f"preemptions: {want}. More: it dropped keys of committed tokens it had read (roll back "
        "only the rejected proposals); fewer: it kept keys of rejected proposals"
    )


def check_preempts_only_without_blocks(log, specs, kind, k, kv_blocks, block_size) -> None:
    """A running request is preempted only when the running requests' next rows would need
    more than kv_blocks blocks with it. Every running request is in every call, so a request
    admitted at call a in round i is fed its rounds i, i + 1, ... in calls a, a + 1, ...
    until it finishes, or is preempted the call after its last."""
    if kv_blocks is None:
        return
    plans = [solo_rounds(kind, tuple(s.prompt), s.max_new_tokens, k) for s in specs]
    admitted = _admissions(log, specs, kind, k)
    victims: dict[int, list[int]] = {}  # call -> blocks each request preempted there needed
    for n, (a, r, i) in enumerate(admitted):
        later = [(c, j) for c, q, j in admitted[n + 1 :] if q == r]
        if not later:
            continue
        c, j = later[0]
        preempted_at = a + (j - i)  # the call after its last round of this stay
        if preempted_at >= c:
            continue  # preempted and admitted again in one step
        rd = plans[r][j]
        need = math.ceil((rd.committed + len(rd.proposals)) / block_size)
        victims.setdefault(preempted_at, []).append(need)
    for c, needs in victims.items():
        running = sum(
            math.ceil((row.start + len(row.tokens)) / block_size)
            for row in log[c].rows
            if row.start > 0
        )
        assert running + sum(needs) > kv_blocks, (
            f"call {c}: {len(needs)} request(s) were preempted, yet the running requests' rows "
            f"need {running} blocks and the preempted ones would have needed {sum(needs)} more: "
            f"{running + sum(needs)} of {kv_blocks}. Preempt only when a running request needs "
            "a block and none is free"
        )


# ----------------------------------------------------------------------------------------------
# Stop tokens (level 4): a request's completion ends at its first new token in `stop`, kept


def until_stop(tokens, stop) -> list[int]:
    """`tokens` up to and including the first one in `stop`; all of them when none is."""
    for i, t in enumerate(tokens):
        if t in stop:
            return list(tokens[: i + 1])
    return list(tokens)


def stopped_answer(spec: WorkloadRequest, stop) -> list[int]:
    """What naive_serve gives the request with stop ids `stop`: its greedy tokens, cut."""
    return until_stop(solo(tuple(spec.prompt), spec.max_new_tokens), stop)


@st.composite
def stops(draw, spec: WorkloadRequest, early: bool = False):
    """Stop ids for one request, read from what the model really generates for it: maybe a token
    of its completion (it then stops there, or earlier where that token came before; the first
    new token too), maybe ids it never generates, maybe a token of its prompt that it never
    generates (which means nothing). `early`: always one of its tokens before the last, so it
    stops before max_new_tokens (spec.max_new_tokens >= 2). A tuple or a list."""
    new = solo(tuple(spec.prompt), spec.max_new_tokens)
    chosen = []
    if early or draw(st.booleans(), label="stops on a token it generates"):
        last = len(new) - (2 if early else 1)
        at = draw(st.one_of(st.just(0), st.integers(0, last)), label="at its new token")
        chosen.append(new[at])
    never = [t for t in range(VOCAB) if t not in new]
    chosen += draw(st.lists(st.sampled_from(never), max_size=2, unique=True), label="never comes")
    in_prompt = [t for t in spec.prompt if t not in new and t not in chosen]
    if in_prompt and draw(st.booleans(), label="a token of its prompt"):
        chosen.append(draw(st.sampled_from(in_prompt), label="prompt token"))
    chosen = draw(st.permutations(chosen), label="stop ids")
    return draw(st.sampled_from([tuple, list]), label="as")(chosen)


def kept_workload(specs: list[WorkloadRequest], stops: list) -> list[WorkloadRequest]:
    """Each request as if it asked for the tokens it keeps: without a draft, a request that stops
    after n tokens is fed exactly as one that asks for n (the checks of level 2 apply to it)."""
    return [
        WorkloadRequest(s.id, s.prompt, len(stopped_answer(s, stop)), s.arrival)
        for s, stop in zip(specs, stops, strict=True)
    ]


def check_stopped_completions(completions, specs: list[WorkloadRequest], stops: list) -> None:
    """One Completion per request, in order, each with naive_serve's tokens: its greedy tokens
    up to and including the first stop token; the steps consistent with its arrival."""
    assert isinstance(completions, list) and len(completions) == len(specs), (
        f"expected a list of {len(specs)} Completions (one per request), got {completions!r:.200}"
    )
    for got, spec, stop in zip(completions, specs, stops, strict=True):
        assert got.id == spec.id, (
            f"Completions must come back in the order of `requests`: expected id {spec.id}, "
            f"got {got.id}"
        )
        want, tokens = stopped_answer(spec, stop), list(got.tokens)
        if tokens != want:
            if tokens[: len(want)] == want:
                usually = (
                    f"it went on past its stop token {want[-1]} (new token {len(want)}): a "
                    "completion ends at its first new token in `stop`; with a draft, the "
                    "accepted proposals count too, and nothing after the stop is kept"
                )
            elif want[-1] in stop and tokens == want[:-1]:
                usually = (
                    f"its stop token {want[-1]} was dropped: the stop token ends the completion "
                    "and is kept as its last token (as Hugging Face keeps eos_token_id)"
                )
            elif want[: len(tokens)] == tokens:
                usually = (
                    "it ended early: only a new token in `stop` ends a request (one in the "
                    "prompt means nothing), and only its own stop ids"
                )
            else:
                usually = (
                    "the tokens differ before any stop: the slips of levels 2 and 3 (pass them "
                    "first)"
                )
            raise AssertionError(
                f"request {spec.id} (prompt of {len(spec.prompt)} tokens, max_new_tokens "
                f"{spec.max_new_tokens}, stop {stop}): tokens differ from naive_serve's\n"
                f" expected {want}\n got      {tokens}\nUsually: {usually}"
            )
        assert got.arrival == spec.arrival, f"request {spec.id}: arrival should be {spec.arrival}"
        assert spec.arrival <= got.first_token <= got.finished, (
            f"request {spec.id}: expected arrival {spec.arrival} <= first_token <= finished, got "
            f"first_token {got.first_token}, finished {got.finished}: `finished` is the step "
            "whose call produced its last token, its stop token when one came"
        )


def check_one_row_per_token(log, kept: list[WorkloadRequest]) -> None:
    """Without a draft every row gives its request one token it keeps, preempted or not."""
    rows = sum(len(call.rows) for call in log)
    want = sum(s.max_new_tokens for s in kept)
    assert rows == want, (
        f"the calls fed {rows} rows for the {want} tokens the requests keep: without a draft "
        "each row gives its request one new token, kept through preemption. More rows: a "
        "request was fed after its stop token came out (it leaves in that very step), or "
        "tokens were decoded again"
    )
