"""What speculative decoding buys on a trained pair of models, in real time on one CPU core.

    python -m katas.speculative_decoding.benchmark                    # the reference
    python -m katas.speculative_decoding.benchmark --impl solution    # your solution.py
    python -m katas.speculative_decoding.benchmark --impl path/to/file.py --models DIR

The models are the repository's trained byte-level pair (`python -m grading.model.train` writes them
to grading/model/checkpoints): a target of about 0.85 M parameters and a draft of about 0.08 M,
trained alike on the Python standard library's source, so the draft's greedy choice is usually the
target's. The prompts are cut from the held-out modules (`grading.model.train.HELD_OUT`), each from
the start of a line; tokens are bytes.

Three ways to decode each prompt greedily, all in float32 on one thread:

- plain greedy decoding: the KV-cache kata's reference `generate`, one target call per token;
- `speculative_decode(target, draft, ..., k)`: the draft proposes k bytes, one target call
  checks them;
- `prompt_lookup_decode(target, ..., k)`: the proposals are what followed the context's last
  n-gram where it occurred before, at no cost.

Every method's bytes are checked against plain greedy decoding's. Calls are read from the models'
own logs (`model.calls`), acceptance from the implementation's `SpecStats` (accepted /
proposed). Timing: `time.perf_counter` over all prompts, the median of --repeats rounds, each
round timing every method once, after one untimed run that gives the counts and the tokens.

Writes `speculative_cpu.md` (the table, an example, the command and the machine) into --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from grading.judge.impl import ImplError, load_impl, repo_relative
from grading.model import TinyLlama, from_pretrained
from grading.model.train import SHIPPED, decode
from grading.model.workload import held_out_prompts
from katas.serving.benchmark import machine_summary
from reference.kv_cache import generate

PROMPTS, PROMPT_BYTES, NEW_BYTES = 8, 32, 96  # 32 + 96 = the models' context of 128 bytes
K = 4
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def load_pair(folder: Path, dtype: torch.dtype) -> tuple[TinyLlama, TinyLlama]:
    """The target and the draft in `folder` (its `target/` and `draft/` checkpoints)."""
    for name in ("target", "draft"):
        if not (folder / name / "config.json").is_file():
            raise ValueError(
                f"models: no checkpoint at {folder / name}; train the pair first with "
                f"`python -m grading.model.train --out {folder}` or pass --models FOLDER"
            )
    return tuple(from_pretrained(folder / name, dtype=dtype) for name in ("target", "draft"))


@dataclass
class Result:
    name: str
    tokens: list[list[int]]  # each prompt's new tokens
    target_calls: int
    draft_calls: int
    proposed: int | None  # None: the method proposes nothing
    accepted: int | None
    per_call: list[int]  # bytes committed by each target call, first prompt
    seconds: float = 0.0  # median over the rounds, all prompts


def committed_per_call(calls, prompt_len: int, total: int) -> list[int]:
    """Bytes each target call committed, from its logged calls on one prompt: every round but
    the first starts with the newest committed token unread, so it commits up to the next
    call's cache length + 1 (the schedule of the kata's level 2, plain greedy decoding's too)."""
    committed = [prompt_len] + [call.cache_len + 1 for call in calls[1:]] + [total]
    return [b - a for a, b in zip(committed, committed[1:], strict=False)]


def run_once(name: str, decode_one: Callable, target, draft, prompts) -> Result:
    """Decode every prompt once with `decode_one(prompt) -> (ids, stats or None)`, counting the
    models' calls from their own logs."""
    tokens, proposed, accepted, per_call = [], None, None, []
    calls = [len(target.calls), len(draft.calls)]
    for i, prompt in enumerate(prompts):
        before = len(target.calls)
        ids, stats = decode_one(prompt)
        tokens.append(ids[0, prompt.shape[1] :].tolist())
        if stats is not None:
            proposed = (proposed or 0) + stats.proposed
            accepted = (accepted or 0) + stats.accepted
        if i == 0:
            per_call = committed_per_call(target.calls[before:], prompt.shape[1], ids.shape[1])
    return Result(
        name,
        tokens,
        target_calls=len(target.calls) - calls[0],
        draft_calls=len(draft.calls) - calls[1],
        proposed=proposed,
        accepted=accepted,
        per_call=per_call,
    )


def methods(impl, target, draft, new: int, k: int) -> dict[str, Callable]:
    """name -> decode_one(prompt) -> (ids [1, T + new], stats or None)."""
    return {
        "plain greedy": lambda p: (generate(target, p, new), None),
        f"speculative, draft k={k}": lambda p: impl.speculative_decode(target, draft, p, new, k=k),
        f"prompt lookup k={k}": lambda p: impl.prompt_lookup_decode(target, p, new, k=k),
    }


@torch.no_grad()
def run_all(impl, target, draft, prompts, new: int, k: int, repeats: int) -> list[Result]:
    """Every method run once for its counts and tokens, then timed in `repeats` rounds."""
    chosen = methods(impl, target, draft, new, k)
    results = [run_once(name, fn, target, draft, prompts) for name, fn in chosen.items()]
    times: dict[str, list[float]] = {name: [] for name in chosen}
    for i in range(repeats):
        for name, fn in chosen.items():
            start = time.perf_counter()
            for prompt in prompts:
                fn(prompt)
            times[name].append(time.perf_counter() - start)
            print(f"round {i + 1}/{repeats} {name:26} {times[name][-1]:7.2f} s", flush=True)
    for r in results:
        r.seconds = statistics.median(times[r.name])
    target.calls.clear()  # the logs grow with every call; nothing reads them any more
    draft.calls.clear()
    return results


# ----------------------------------------------------------------------------------------------
# Report


def table(results: list[Result]) -> list[str]:
    greedy = results[0]
    rows = [
        "| method | acceptance | bytes / target call | target calls | draft calls | seconds | "
        "bytes/s | speed-up | same bytes as greedy |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        n = sum(len(t) for t in r.tokens)
        accept = "—" if not r.proposed else f"{r.accepted / r.proposed:.1%}"
        same = sum(a == b for a, b in zip(r.tokens, greedy.tokens, strict=True))
        rows.append(
            f"| {r.name} | {accept} | {n / r.target_calls:.2f} | {r.target_calls} | "
            f"{r.draft_calls} | {r.seconds:.2f} | {n / r.seconds:,.0f} | "
            f"{greedy.seconds / r.seconds:.2f}× | {same}/{len(r.tokens)} |"
        )
    return rows


def describe(folder: Path, model: TinyLlama) -> str:
    """A model's size and, where its training.json is there, its training."""
    c = model.config
    params = sum(p.numel() for p in model.parameters())
    text = (
        f"{params:,} parameters ({c.n_layers} layer(s), {c.n_heads} heads × {c.head_dim}, "
        f"hidden width {c.hidden_dim})"
    )
    record = folder / "training.json"
    if record.is_file():
        info = json.loads(record.read_text())
        text += f", {info['steps']} training steps, final loss {info['final_loss']} nats/byte"
    return text


def runs(values: list[int]) -> str:
    """`values` with each run of equal values written once with its length: 1 5×3 2."""
    out: list[list[int]] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return " ".join(f"{v}×{n}" if n > 1 else str(v) for v, n in out)


def report(results, prompts, new, k, folder: Path, target, draft, command: str) -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    agreement = folder / "agreement.json"
    measured = ""
    if agreement.is_file():
        rate = json.loads(agreement.read_text())["greedy_agreement"]
        measured = f" Their greedy agreement on held-out source (training's measure): {rate:.1%}."
    prompt = prompts[0][0].tolist()
    example = [
        f"Prompt 1 ({len(prompt)} bytes) and the {new} bytes every method wrote after it:",
        "",
        "```python",
        decode(prompt) + decode(results[0].tokens[0]),
        "```",
        "",
        "Bytes committed by each target call on it, in order (5×3: three calls of 5 bytes):",
        "",
        *[f"- {r.name}: {runs(r.per_call)}" for r in results],
    ]
    return "\n".join(
        [
            "# Speculative decoding on a trained pair (cpu)",
            "",
            f"`{command}`, {stamp}.",
            "",
            f"Machine: {machine_summary('cpu')}.",
            "",
            f"Models (`{repo_relative(folder)}`), {next(target.parameters()).dtype}: the target "
            f"{describe(folder / 'target', target)}; the draft "
            f"{describe(folder / 'draft', draft)}.{measured}",
            "",
            f"Workload: {len(prompts)} prompts of {len(prompt)} bytes from the held-out standard "
            f"library modules, {new} new bytes each, greedy, k = {k}.",
            "",
            *table(results),
            "",
            "Acceptance: draft bytes kept / draft bytes proposed (`SpecStats`). Bytes / target "
            "call: new bytes over target calls, calls read from the model's own log. Seconds: "
            "all prompts, the median of the timed rounds; speed-up: plain greedy's seconds over "
            "the method's. Same bytes: outputs identical to plain greedy decoding's.",
            "",
            *example,
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m katas.speculative_decoding.benchmark",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--impl", default="reference",
        help="reference (default), solution (katas/speculative_decoding/solution.py) or a path",
    )  # fmt: skip
    parser.add_argument(
        "--models", type=Path, default=SHIPPED, help=f"folder of target/ and draft/ ({SHIPPED})"
    )
    parser.add_argument("--prompts", type=int, default=PROMPTS, help="prompts (default 8)")
    parser.add_argument("--prompt-bytes", type=int, default=PROMPT_BYTES, help="bytes per prompt")
    parser.add_argument("--new-bytes", type=int, default=NEW_BYTES, help="new bytes per prompt")
    parser.add_argument("--k", type=int, default=K, help="proposals per round (default 4)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32")
    parser.add_argument("--out", type=Path, default=Path("results"), help="folder for the report")
    args = parser.parse_args(argv)
    if min(args.prompts, args.prompt_bytes, args.new_bytes, args.k, args.repeats) < 1:
        raise SystemExit("--prompts, --prompt-bytes, --new-bytes, --k and --repeats must be >= 1")
    torch.set_num_threads(1)  # one core, every method alike
    try:
        impl = load_impl("speculative_decoding", args.impl)
        target, draft = load_pair(args.models, DTYPES[args.dtype])
    except (ImplError, ValueError) as exc:
        raise SystemExit(str(exc)) from None
    context = min(target.config.max_seq_len, draft.config.max_seq_len)
    if args.prompt_bytes + args.new_bytes > context:
        raise SystemExit(
            f"--prompt-bytes {args.prompt_bytes} + --new-bytes {args.new_bytes} exceeds the "
            f"models' context of {context} bytes"
        )
    prompts = [torch.tensor([p]) for p in held_out_prompts([args.prompt_bytes] * args.prompts)]
    results = run_all(impl, target, draft, prompts, args.new_bytes, args.k, args.repeats)
    command = "python -m katas.speculative_decoding.benchmark " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    text = report(
        results, prompts, args.new_bytes, args.k, args.models, target, draft, command.strip()
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speculative_cpu.md").write_text(text)
    print(text)
    print(f"written to {args.out / 'speculative_cpu.md'}")
    differ = [r.name for r in results if r.tokens != results[0].tokens]
    if differ:
        print(
            f"{', '.join(differ)}: bytes differ from plain greedy decoding's. Greedy speculative "
            "decoding must reproduce them; a flip at a near-tie of float32 logits is possible but "
            "rare (check with --dtype float64), a wrong acceptance or cache rollback is likelier"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
