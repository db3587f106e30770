"""The shared tiny model: its public contract, and outputs that really depend on the context."""

from __future__ import annotations

import pytest
import torch

from grading.devices import REHEARSAL, float_dtypes
from grading.judge.rehearsal import Tally, Work
from grading.judge.tolerance import assert_close, assert_error_within
from grading.model import SequenceCache, greedy_generate_no_cache, make_model
from grading.model.naive import Request, naive_serve
from grading.model.workload import shared_prefix_workload


class ConcatCache:
    """The simplest cache that honours the model's contract (a test double, not a solution)."""

    def __init__(self, n_layers: int) -> None:
        self.k: list = [None] * n_layers
        self.v: list = [None] * n_layers

    @property
    def seq_len(self) -> int:
        return 0 if self.k[0] is None else self.k[0].shape[2]

    def update(self, layer, k, v):
        if self.k[layer] is not None:
            k, v = torch.cat([self.k[layer], k], dim=2), torch.cat([self.v[layer], v], dim=2)
        self.k[layer], self.v[layer] = k, v
        return k, v


def prompt(B=2, T=24, seed=1):
    return torch.randint(0, 64, (B, T), generator=torch.Generator().manual_seed(seed))


def test_config_and_shapes():
    model = make_model(0, torch.float32)
    c = model.config
    for field in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "max_seq_len"):
        assert isinstance(getattr(c, field), int)
    assert c.n_heads % c.n_kv_heads == 0 and c.n_kv_heads < c.n_heads, "the default model uses GQA"
    assert model(prompt()).shape == (2, 24, c.vocab_size)


def test_weights_come_from_the_seed_in_every_dtype():
    ids = prompt()
    a, b = make_model(3, torch.float64)(ids), make_model(3, torch.float64)(ids)
    assert torch.equal(a, b)
    assert not torch.allclose(a, make_model(4, torch.float64)(ids))
    low = make_model(3, torch.float32)(ids).double()
    assert (low - a).abs().max() < 1e-4 * a.abs().max()


def test_cache_contract_positions_and_update_calls():
    model = make_model(0, torch.float64)
    ids = prompt(T=12)
    cache = ConcatCache(model.config.n_layers)
    full = model(ids)
    steps = [model(ids[:, :7], cache)] + [model(ids[:, t : t + 1], cache) for t in range(7, 12)]
    assert torch.allclose(torch.cat(steps, dim=1), full, rtol=1e-10, atol=1e-10)


def test_changing_an_early_token_changes_later_logits_clearly():
    model = make_model(0, torch.float64)
    ids = prompt()
    changed = ids.clone()
    changed[:, 1] = (changed[:, 1] + 7) % 64
    late = slice(16, None)
    diff = (model(ids)[:, late] - model(changed)[:, late]).abs().amax(-1)  # (B, late)
    spread = model(ids)[:, late].std(-1)
    assert (diff > 0.5 * spread).float().mean() > 0.5, (
        "the second token should matter to the logits 15+ positions later"
    )


def test_attention_is_far_from_uniform():
    model = make_model(0, torch.float64)
    T = 24
    for probs in model.attention_maps(prompt(T=T)):  # (B, H, T, T)
        rows = probs[:, :, 8:]  # queries that see at least 9 keys
        uniform = 1.0 / torch.arange(9, T + 1, dtype=torch.float64)
        assert rows.amax(-1).mean() > 4 * uniform.mean(), "attention should be sharp"


def test_greedy_output_depends_on_the_context_not_only_the_last_token():
    model = make_model(0, torch.float64)
    base = prompt(B=4, T=10)
    other = base.clone()
    other[:, :-1] = prompt(B=4, T=9, seed=7)  # same last token, different history
    a = greedy_generate_no_cache(model, base, 8)[:, 10:]
    b = greedy_generate_no_cache(model, other, 8)[:, 10:]
    assert (a != b).any(1).all(), "continuations should depend on more than the last token"
    echo = (a[:, 1:] == a[:, :-1]).float().mean()
    assert echo < 0.5, "the model should not mostly repeat its last token"


def test_rejects_bad_ids():
    model = make_model(0, torch.float32, max_seq_len=8)
    with pytest.raises(ValueError, match="ids"):
        model(torch.zeros(9, dtype=torch.long)[None])
    with pytest.raises(ValueError, match="ids"):
        model(torch.zeros(3, dtype=torch.long))


def test_sequence_cache_honours_the_contract():
    model = make_model(0, torch.float64)
    ids = prompt(B=1, T=12)
    cache = SequenceCache(model.config, capacity=12)
    steps = [model(ids[:, :5], cache)] + [model(ids[:, t : t + 1], cache) for t in range(5, 12)]
    assert cache.seq_len == 12
    assert torch.allclose(torch.cat(steps, dim=1), model(ids), rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="capacity"):
        model(ids[:, :1], SequenceCache(model.config, capacity=0))


@torch.no_grad()
def test_a_ragged_row_does_not_depend_on_the_rest_of_the_batch():
    """A prefill of 17 beside decodes of 1 and another prefill, caches of different lengths:
    each row's logits equal running that row alone, to 1e-12 in float64."""
    model = make_model(0, torch.float64)
    history = [prompt(B=1, T=n, seed=n)[0] for n in (3, 40, 1)]  # already in three caches
    caches, alone = [], []
    for past in history:
        cache, solo = SequenceCache(model.config), SequenceCache(model.config)
        model(past[None], cache), model(past[None], solo)
        caches.append(cache)
        alone.append(solo)
    new = [prompt(B=1, T=1, seed=5)[0], prompt(B=1, T=17, seed=6)[0], prompt(B=1, T=1, seed=7)[0]]
    rows, row_caches = new + [prompt(B=1, T=9, seed=8)[0]], caches + [SequenceCache(model.config)]
    alone.append(SequenceCache(model.config))
    got = model.forward_batch(rows, row_caches)
    for b, (row, cache) in enumerate(zip(rows, alone, strict=True)):
        want = model(row[None], cache)[0]  # (T_b, vocab)
        assert got[b].shape == want.shape
        err = float((got[b] - want).abs().max())
        assert err <= 1e-12 * float(want.abs().max()), f"row {b} differs by {err:.3g} from alone"
    assert [c.seq_len for c in row_caches] == [4, 57, 2, 9]


def test_forward_batch_records_every_call():
    model = make_model(0, torch.float64)
    a, b = SequenceCache(model.config), SequenceCache(model.config)
    model.forward_batch([torch.tensor([1, 2, 3]), torch.tensor([4])], [a, b])
    model.forward_batch([torch.tensor([5])], [b])
    first, second = model.batch_log
    assert [(r.cache, r.start, r.tokens) for r in first.rows] == [
        (id(a), 0, (1, 2, 3)),
        (id(b), 0, (4,)),
    ]
    assert [(r.cache, r.start, r.tokens) for r in second.rows] == [(id(b), 1, (5,))]
    assert (first.new_tokens, second.new_tokens) == (4, 1)


def test_forward_batch_rejects_bad_rows():
    model = make_model(0, torch.float32, max_seq_len=8)
    c = SequenceCache(model.config)
    bad = {
        "no rows": ([], []),
        "a cache short": ([torch.tensor([1])], []),
        "a row of shape [1, 2]": ([torch.tensor([[1, 2]])], [c]),
        "an empty row": ([torch.tensor([], dtype=torch.long)], [c]),
        "a row past max_seq_len": ([torch.zeros(9, dtype=torch.long)], [c]),
        "one cache for two rows": ([torch.tensor([1]), torch.tensor([2])], [c, c]),
    }
    for what, (rows, caches) in bad.items():
        with pytest.raises(ValueError, match="rows|caches"):
            model.forward_batch(rows, caches)
        assert c.seq_len == 0, f"{what}: a refused call must leave the cache alone"
    assert model.batch_log == []


def test_a_packed_row_that_is_empty_or_runs_past_the_end_asks_about_cropping():
    """An empty row, or one past the context, is what an engine that did not crop its cache (or
    its row's start) back after a rejection or a rollback feeds: the message says so, as
    `forward`'s does for an empty input."""
    model = make_model(0, torch.float32, max_seq_len=8)
    attention = lambda layer, q, k, v: q  # never reached: the rows are refused first
    hint = "cropped back after a rejection or a rollback?"
    with pytest.raises(ValueError, match="empty row") as empty:
        model.forward_packed([torch.tensor([], dtype=torch.long)], [5], attention)
    with pytest.raises(ValueError, match=r"rows\[1\]: positions 7\.\.9 must lie in 0\.\.7") as past:
        model.forward_packed([torch.tensor([1]), torch.tensor([1, 2, 3])], [0, 7], attention)
    for refused in (empty, past):
        assert hint in str(refused.value), str(refused.value)
    with pytest.raises(ValueError, match="cropped back"):
        model(torch.zeros((1, 0), dtype=torch.long), SequenceCache(model.config))
    assert model.batch_log == []


def test_the_shared_prefix_workload_shares_its_prefixes_and_nothing_else():
    """4 distinct system prompts of 64 tokens, used in turn; every tail its own, 4 to 16 tokens;
    Poisson arrivals in order; the same workload from the same seed."""
    requests = shared_prefix_workload(
        48, n_prefixes=4, prefix_len=64, tail=(4, 16), rate=2.0, vocab_size=256, seed=0
    )
    assert [r.id for r in requests] == list(range(48))
    prefixes = [tuple(r.prompt[:64]) for r in requests]
    tails = [tuple(r.prompt[64:]) for r in requests]
    assert len(set(prefixes)) == 4, "4 distinct prefixes"
    assert all(prefixes[i] == prefixes[i % 4] for i in range(48)), "each prefix in turn"
    assert all(4 <= len(t) <= 16 for t in tails) and len(set(tails)) == 48, "tails of their own"
    assert len({len(t) for t in tails}) > 1, "tail lengths vary"
    arrivals = [r.arrival for r in requests]
    assert arrivals == sorted(arrivals) and arrivals[-1] > 0
    assert all(1 <= r.max_new_tokens <= 256 - len(r.prompt) + 1 for r in requests)
    assert all(0 <= t < 256 for r in requests for t in r.prompt)
    again = shared_prefix_workload(
        48, n_prefixes=4, prefix_len=64, tail=(4, 16), rate=2.0, vocab_size=256, seed=0
    )
    assert again == requests, "the same seed gives the same workload"
    other = shared_prefix_workload(48, rate=2.0, vocab_size=256, seed=1)
    assert other != requests
    # A vocabulary of 2 holds only 2 distinct one-token prefixes, and 2 + 4 distinct short tails.
    tight = shared_prefix_workload(6, n_prefixes=2, prefix_len=1, tail=(1, 2), rate=1.0,
                                   vocab_size=2)  # fmt: skip
    assert len({tuple(r.prompt[:1]) for r in tight}) == 2
    assert len({tuple(r.prompt[1:]) for r in tight}) == 6
    with pytest.raises(ValueError, match="vocab_size"):
        shared_prefix_workload(7, n_prefixes=2, prefix_len=1, tail=(1, 2), rate=1.0, vocab_size=2)
    with pytest.raises(ValueError, match="tail"):
        shared_prefix_workload(4, prefix_len=250, tail=(4, 16), rate=1.0, max_seq_len=256)


def test_the_mixture_variant_routes_each_token_to_top_k_experts():
    model = make_model(0, torch.float64, n_experts=8, top_k=2)
    moe = model.blocks[0].mlp
    assert len(moe.experts) == 8 and moe.top_k == 2
    x = torch.randn(5, model.config.dim, generator=torch.Generator().manual_seed(0)).double()
    weights, experts = moe.route(x)
    assert weights.dtype == torch.float32 and torch.allclose(weights.sum(-1), torch.ones(5))
    assert (weights[:, 0] >= weights[:, 1]).all() and (experts[:, 0] != experts[:, 1]).all()
    with torch.no_grad():
        want = sum(
            weights[:, r, None].double() * torch.stack([moe.experts[e](x[t]) for t, e in
                                                         enumerate(experts[:, r].tolist())])
            for r in range(2)
        )  # fmt: skip
        assert torch.allclose(moe(x), want, atol=1e-12)
        cache = ConcatCache(model.config.n_layers)
        ids = prompt(1, 12)
        full = model(ids)
        step = torch.cat([model(ids[:, :7], cache), model(ids[:, 7:], cache)], dim=1)
        assert torch.allclose(full, step, atol=1e-10)
    with pytest.raises(ValueError, match="top_k"):
        make_model(0, n_experts=2, top_k=3)


def test_forward_packed_equals_forward_batch_with_the_callers_memory():
    """An engine that keeps k and v itself, through `attention`, gets forward_batch's logits."""
    model = make_model(0, torch.float64, n_experts=4, top_k=2)
    rows = [prompt(1, 5, seed=2)[0], prompt(1, 3, seed=3)[0]]
    caches = [SequenceCache(model.config) for _ in rows]
    memory = [ConcatCache(model.config.n_layers) for _ in rows]
    with torch.no_grad():
        want = model.forward_batch(rows, caches)
        starts = [0, 0]
        lengths = [len(r) for r in rows]

        def attention(layer, q, k, v):  # q (N, H, hd); k, v (N, Hkv, hd)
            outs = []
            for q_b, k_b, v_b, m in zip(q.split(lengths), k.split(lengths), v.split(lengths),
                                        memory, strict=True):  # fmt: skip
                # (T_b, Hkv, hd) -> (1, Hkv, T_b, hd), the cache contract's layout
                kv = [t.transpose(0, 1)[None] for t in (k_b, v_b)]
                k_all, v_all = m.update(layer, *kv)
                group = q.shape[1] // k.shape[1]
                k_all, v_all = (t[0].repeat_interleave(group, 0) for t in (k_all, v_all))
                s = q_b.transpose(0, 1) @ k_all.transpose(1, 2) / q.shape[-1] ** 0.5
                s = s.masked_fill(~torch.ones(s.shape[1:], dtype=torch.bool).tril(), -torch.inf)
                outs.append((s.softmax(-1) @ v_all).transpose(0, 1))
            return torch.cat(outs)

        got = model.forward_packed(rows, starts, attention)
    for g, w in zip(got, want, strict=True):
        assert torch.allclose(g, w, atol=1e-10)
    assert model.batch_log[-1].rows[0].cache is None and model.calls[-1].batch == 2
    with pytest.raises(ValueError, match="attention"):
        model.forward_packed(rows, starts, lambda layer, q, k, v: q[:1])
    with pytest.raises(ValueError, match="feed_forward"):
        model.forward_packed(rows, starts, attention, lambda layer, x: x[:, :3])
    with pytest.raises(ValueError, match="starts"):
        model.forward_packed(rows, [0], attention)


NEW = (1, 17, 1, 5, 2, 13, 3, 1, 7)  # new tokens per row of a ragged batch: ones and primes
CACHED = (3, 0, 40, 11, 1, 5, 29, 0, 2)  # tokens already in each row's cache


def ragged_batch(model, B: int, least_cached: int = 0):
    """B rows feeding NEW[b] tokens (in turn) through caches already holding CACHED[b] (at least
    `least_cached`) tokens. The same B gives the same rows and histories, whatever the dtype."""
    gen = torch.Generator().manual_seed(B)
    rows, caches = [], []
    for b in range(B):
        cache, cached = SequenceCache(model.config), max(CACHED[b % 9], least_cached)
        history = torch.randint(0, 64, (1, cached), generator=gen)
        if cached:
            model(history, cache)
        rows.append(torch.randint(0, 64, (NEW[b % 9],), generator=gen))
        caches.append(cache)
    return rows, caches


@torch.no_grad()
def one_attention_for_all_rows(monkeypatch, on: bool, model, B: int):
    """forward_batch's logits on its GPU path (one scaled_dot_product_attention for all rows,
    which a rehearsal takes on the CPU too) or on the CPU's row-by-row path."""
    monkeypatch.setenv(REHEARSAL, "1" if on else "0")
    return model.forward_batch(*ragged_batch(model, B))


@pytest.mark.parametrize("dtype", [torch.float64, *float_dtypes()], ids=str)
def test_one_attention_for_all_rows_equals_the_row_by_row_path(monkeypatch, dtype):
    """The GPU path pads the rows to the longest and masks: 9 rows of 1, 17, 1, 5, 2, 13, 3, 1
    and 7 new tokens over caches of 3, 0, 40, 11, 1, 5, 29, 0 and 2 tokens. Its logits equal the
    row-by-row path's to the dtype's tolerance (float64, float32); in float16 and bfloat16, where
    two sharp layers already lose a few percent, its error against the float64 oracle is at most
    twice the row-by-row path's own (plus the dtype's floor)."""
    model = make_model(0, dtype)
    batched = one_attention_for_all_rows(monkeypatch, True, model, 9)
    row_by_row = one_attention_for_all_rows(monkeypatch, False, model, 9)
    oracle = one_attention_for_all_rows(monkeypatch, False, make_model(0, torch.float64), 9)
    for b, (got, want, exact) in enumerate(zip(batched, row_by_row, oracle, strict=True)):
        name = f"row {b} ({NEW[b]} new after {CACHED[b]} cached), one attention for all rows"
        hint = (
            "expected: the CPU's row-by-row path (or, in half precision, its error). A wrong "
            "padded layout, mask or unpadding misplaces a query or a key"
        )
        if dtype in (torch.float64, torch.float32):
            assert_close(got, want, name=name, hint=hint)
        assert_error_within(got, exact, want, name=name, hint=hint)


def operators(fn) -> int:
    """PyTorch operators `fn()` launches, views excluded (grading.judge.rehearsal.Tally)."""
    work = Work()
    with Tally(work):
        fn()
    return work.ops


@torch.no_grad()
def test_one_attention_for_all_rows_launches_no_more_operators_per_row_than_the_caches_need(
    monkeypatch,
):
    """Operators per layer of forward_batch's GPU path (counted on the CPU in a rehearsal) for 1,
    4 and 16 rows of ragged lengths over caches of unequal lengths.

    A layer's operators for B rows are P(B) = C(B) with two layers minus C(B) with one, C being a
    whole call. Per row and layer, only the row's own `SequenceCache.update` must run: its u
    operators (copying the new keys and the new values into place: u = 2). Everything else, the
    projections, the padding, the one scaled_dot_product_attention and the unpadding, is the
    same for any B. Hence the bound P(B) - P(1) <= (B - 1) u: P(16) - P(1) <= 15 u = 30. (The
    CPU's row-by-row path launches 14 operators more per row and layer for attention.) The
    whole call obeys the same bound with one layer: positions, embedding, head and the padded
    layout (made once per call) do not grow with B either. forward_packed's own operators (with
    a caller's attention that launches none) are the same for 1, 4 and 16 rows.
    """
    cache = SequenceCache(make_model(0).config)
    k = torch.zeros(1, 2, 3, 16)
    cache.update(0, k, k)
    u = operators(lambda: cache.update(0, k, k))  # a cache already holding keys: no allocation

    def call(n_layers: int, B: int) -> int:
        monkeypatch.setenv(REHEARSAL, "1")
        model = make_model(0, n_layers=n_layers)
        rows, caches = ragged_batch(model, B, least_cached=1)
        return operators(lambda: model.forward_batch(rows, caches))

    whole = {B: call(1, B) for B in (1, 4, 16)}
    per_layer = {B: call(2, B) - whole[B] for B in (1, 4, 16)}
    for B in (4, 16):
        assert per_layer[B] - per_layer[1] <= (B - 1) * u, (
            f"one layer launches {per_layer[B]} operators for {B} rows, more than the "
            f"{per_layer[1]} for one row plus {B - 1} x {u} for the other rows' cache updates "
            f"(operators per layer, by rows: {per_layer}). Something besides the cache update "
            "runs once per row: attention row by row, a per-row copy or slice"
        )
        assert whole[B] - whole[1] <= (B - 1) * u, (
            f"a one-layer call launches {whole[B]} operators for {B} rows, more than the "
            f"{whole[1]} for one row plus {B - 1} x {u} for the other rows' cache updates "
            f"(by rows: {whole}): something outside the layers runs once per row"
        )
    model = make_model(0)
    packed = {
        B: operators(
            lambda B=B: model.forward_packed(
                [torch.tensor([1] * NEW[b % 9]) for b in range(B)],
                [CACHED[b % 9] for b in range(B)],
                lambda layer, q, k, v: q,
            )
        )
        for B in (1, 4, 16)
    }
    assert packed[1] == packed[4] == packed[16], (
        f"forward_packed launches {packed} operators (by rows) with an attention that launches "
        "none: its own work should not depend on the number of rows"
    )


def test_naive_serve_ends_a_request_at_its_first_new_stop_token():
    """The oracle of the serving kata's level 4: a completion ends at the first new token in
    `stop`, which it keeps; `finished` is that token's step and the next request starts the step
    after; a stop token in the prompt, or one that never comes, changes nothing."""
    model = make_model(0, torch.float64)
    prompts = [[5, 9, 2, 7], [11, 3], [20, 21, 22]]
    full = [
        greedy_generate_no_cache(model, torch.tensor([p]), 8)[0, len(p) :].tolist() for p in prompts
    ]
    never = next(t for t in range(64) if all(t not in f for f in full))
    first_stop = full[0][3]  # ends request 0 at its first occurrence, at most the 4th token
    cut = full[0][: full[0].index(first_stop) + 1]
    requests = [
        Request(0, prompts[0], 8, 0, stop=(never, first_stop)),
        Request(1, prompts[1], 8, 0, stop=(full[1][0],)),  # its very first new token
        Request(2, prompts[2], 8, 1, stop=tuple(t for t in prompts[2] if t not in full[2])),
        Request(3, prompts[0], 8, 0),  # no stop tokens: as before
    ]
    assert requests[2].stop, "request 2 needs a prompt token it never generates"
    out = naive_serve(model, requests)
    assert [c.tokens for c in out] == [cut, full[1][:1], full[2], full[0]]
    assert [(c.first_token, c.finished) for c in out] == [
        (0, len(cut) - 1),
        (len(cut), len(cut)),  # its stop token is its first: one step
        (len(cut) + 9, len(cut) + 16),  # arrived at 1, after request 3: all 8 tokens
        (len(cut) + 1, len(cut) + 8),
    ]
    assert Request(7, [1], 2, 3).stop == (), "a request built without stop ids has none"
