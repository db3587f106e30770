"""The models the simulation runs, and their tokens as text.

The repository ships a small trained pair (`python -m grading.model.train` writes it to
`grading/model/checkpoints/`): a target and a draft whose tokens are bytes, trained on the Python
standard library's source. With that pair the screens show text: prompts are windows of held-out
standard-library source and every token is decoded. Without it (a checkout without the checkpoints,
or a vocabulary other than bytes) the screens run random-weight models and show token ids, with a
one-line notice saying why.
"""

from __future__ import annotations

import codecs
import functools
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from grading.model import make_model

MODEL_LEN = 64  # the random-weight model's max_seq_len; every workload fits in it
BYTES = 256  # the trained pair's vocabulary: one token per byte
# How a character that would break a row shows: newline ⏎, tab ⇥, other control characters as
# their Unicode pictures (␀ ... ␟, ␡).
SHOWN_AS = {**{chr(c): chr(0x2400 + c) for c in range(32)}, "\x7f": "␡", "\n": "⏎", "\t": "⇥"}


@dataclass
class Models:
    """The target every batching screen and the speculative screen run, and the trained draft
    (None on random weights: the speculative screen then scripts its draft)."""

    target: torch.nn.Module
    draft: torch.nn.Module | None = None
    notice: str = ""  # why the trained pair is not in use; empty when it is

    @property
    def text(self) -> bool:
        """Whether tokens are bytes, shown as text."""
        return self.draft is not None


def random_models(notice: str = "") -> Models:
    """The random-weight model the screens ran before any were trained (vocabulary 64)."""
    return Models(make_model(0, torch.float64, max_seq_len=MODEL_LEN), None, notice)


def load_models(folder: str | Path | None = None) -> Models:
    """The trained pair in `folder` (`target/` and `draft/`; default: the shipped one), in
    float64 so that batched and solo decoding agree exactly; random weights with a notice if
    the pair is missing, cannot load, or does not read bytes."""
    from grading.model import from_pretrained
    from grading.model.train import SHIPPED

    folder = Path(SHIPPED if folder is None else folder)
    fallback = "random weights, tokens shown as numbers"
    if not all((folder / name / "config.json").is_file() for name in ("target", "draft")):
        return random_models(
            f"no trained models in {folder} (python -m grading.model.train writes them): {fallback}"
        )
    try:
        target, draft = (from_pretrained(folder / n, torch.float64) for n in ("target", "draft"))
    except Exception as exc:  # noqa: BLE001 - whatever is wrong with them, the screens still run
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
        return random_models(f"the models in {folder} did not load ({reason}): {fallback}")
    vocab = (target.config.vocab_size, draft.config.vocab_size)
    if vocab != (BYTES, BYTES):
        return random_models(
            f"the models in {folder} have vocabularies {vocab}, not bytes ({BYTES}): {fallback}"
        )
    return Models(target, draft)


def visible(text: str) -> str:
    """The text on one row: newlines as ⏎, tabs as ⇥, other control characters as pictures."""
    return "".join(SHOWN_AS.get(ch, ch) for ch in text)


def shown(ids) -> str:
    """Byte tokens decoded (as `grading.model.train.decode` does) and made visible."""
    from grading.model.train import decode

    return visible(decode(ids))


def pieces(ids: list[int], sizes: list[int]) -> list[str]:
    """The decoded text of `ids` cut into consecutive pieces of `sizes` bytes, made visible.

    A character of several bytes belongs to the piece holding its last byte, so the pieces join
    to exactly `shown(ids)` even where a cut falls inside a character.
    """
    if sum(sizes) != len(ids):
        raise ValueError(f"sizes: expected them to add up to {len(ids)} bytes, got {sum(sizes)}")
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out, at = [], 0
    for size in sizes:
        out.append(decoder.decode(bytes(ids[at : at + size])))
        at += size
    if out:
        out[-1] += decoder.decode(b"", final=True)
    return [visible(text) for text in out]


@functools.cache
def _held_out() -> tuple[bytes, tuple[int, ...]]:
    """The held-out source as bytes, and where its code lines start (after the indentation,
    at a letter: a statement, not a comment or a blank line)."""
    from grading.model.train import stdlib_source

    data = stdlib_source(held_out=True).encode()
    starts, line = [], 0
    for text in data.split(b"\n"):
        stripped = text.lstrip(b" ")
        if stripped[:1].isalpha():
            starts.append(line + len(text) - len(stripped))
        line += len(text) + 1
    return data, tuple(starts)


def source_prompts(lengths: list[int], seed: int, mid_line: bool = False) -> list[list[int]]:
    """One window of held-out standard-library source per length (in bytes, ASCII only), each
    starting at a line of code (and with `mid_line`, ending inside a name, where what follows is
    code rather than a new line's indentation); the same windows for the same lengths and seed."""
    data, starts = _held_out()
    rng = random.Random(seed)
    prompts = []
    for n in lengths:
        fitting = [
            s
            for s in starts
            if s + n <= len(data)
            and data[s : s + n].isascii()
            and (not mid_line or (data[s + n - 2 : s + n].isalpha()))
        ]
        start = rng.choice(fitting)
        prompts.append(list(data[start : start + n]))
    return prompts
