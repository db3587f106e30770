"""The interactive simulation: watch the katas' implementations batch, cache, speculate and tile.

    python -m katas.simulate                    # the references
    python -m katas.simulate --impl solution    # your own solutions
    python -m katas.simulate --export DIR       # SVG screenshots and a PNG timeline, no terminal
    python -m katas.simulate --models DIR       # another trained pair (DIR/target, DIR/draft)

`scenes.py` runs the implementations and reads back what they did; `app.py` shows it (Textual);
`export.py` writes the pictures the kata READMEs use; `models.py` loads the trained byte-level
pair (or random weights without it) and turns tokens into text.
"""

from grading.devices import use_triton_interpreter_without_gpu

# The FlashAttention screen runs Triton code; without a GPU it needs the interpreter, which must be
# chosen before anything imports Triton (PyTorch's FLOP counter does).
use_triton_interpreter_without_gpu()
