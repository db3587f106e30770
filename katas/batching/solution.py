"""The batching kata: your solution. Read katas/batching/README.md first.

Run the tests with `nox -s batching` (or `pytest katas/batching`).

The clock: time is counted in steps. Every model call is one step; a step in which nothing can
run passes idle. A request may be served only at steps >= its `arrival`. One model call serves a
ragged batch (see grading/model/llama.py):

    model.forward_batch(rows, caches) -> logits
        rows:   B LongTensors [T_b] on the model's device (next(model.parameters()).device),
                the new tokens of each row: a whole prompt, a chunk of one, or one token
        caches: B caches, one per row, e.g. grading.model.SequenceCache(model.config)
        logits: B tensors [T_b, vocab_size]; the next token of a row is logits[b][-1].argmax()

Every strategy decodes greedily (the argmax of the last logits, in the logits' own dtype), and
each request's tokens must equal decoding it alone. Token ids are any of 0..vocab_size - 1 and
arrivals any int >= 0: keep both as Python ints (or int64). An empty list of requests gives [],
with no model call. Run your decoding loops under torch.no_grad(); send only token ids between
the model and Python (`.item()` or `.tolist()` of a few ids).

Stop tokens (level 5). A request is done when it has max_new_tokens tokens or as soon as it
generates a token in its `stop` (a tuple, or a list, of ids; default (), none): that token is
kept as the completion's last, so `tokens` is decoding alone cut after its first stop token,
and `finished` is the step of the call that produced it. Any generated token counts, the first
(from the prefill) too; a stop id in the prompt means nothing. A done request is fed no more,
in every strategy. The length checks below (max_seq_len, kv_blocks) count max_new_tokens
whatever `stop` says.

Bad input raises ValueError naming the argument (every strategy):
- an empty prompt, or prompt tokens that are not Python ints in 0..vocab_size - 1 (a bool, a
  float or a tensor is refused, and so is a prompt given as a tensor);
- max_new_tokens < 1, or a negative arrival;
- len(prompt) + max_new_tokens - 1 > model.config.max_seq_len (the last new token is never fed);
- two requests with the same id;
- a stop that is not a tuple (or list) of Python ints in 0..vocab_size - 1 (level 5);
- batch_size, max_batch_size, max_tokens_per_step, kv_blocks or block_size < 1, max_wait < 0;
- a request that cannot fit in kv_blocks even alone:
  ceil((len(prompt) + max_new_tokens - 1) / block_size) > kv_blocks (a partly filled last
  block counts whole).

Every call is checked by the harness (README, "Rules every call follows"):
- no argument is changed in place (tensors, lists, requests and their prompts);
- unchanged means bit for bit, layout and autograd state included, the models and modules you
  are given too (weights, buffers, train/eval mode), and also after the call has returned;
- the work is done with PyTorch on tensors (no NumPy, no DLPack, no bit-casts, no
  .tolist() or .item() of more than 256 float elements in a call);
- the work happens in the call's own thread (no threads or processes);
- results are plain torch.Tensor objects, never subclasses;
- the judge (the harness, the tests, Hypothesis's settings) is left alone, and PyTorch's global
  settings (grad mode, default dtype, ...) are as they were when a call returns;
- answers are computed when asked, never remembered from earlier calls (nor by the tensors'
  identity), and two calls never return the same tensor;
- a model's or module's weights may change in place between two calls: use the weights it
  holds at each call, keep nothing derived from them from one call to the next;
- the code behaves the same whether or not it is measured;
- decoding runs under torch.no_grad();
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    id: int
    prompt: list[int]
    max_new_tokens: int
    arrival: int = 0  # the first step at which it may be served
    stop: tuple[int, ...] = ()  # level 5: token ids that end the completion (kept), none by default


@dataclass
class Completion:
    id: int
    tokens: list[int]  # the new tokens only: max_new_tokens of them, or up to the first stop token
    arrival: int
    first_token: int  # the step whose model call produced the first new token
    finished: int  # the step whose model call produced the last new token


# Level 1: static batching


def static_batching(model, requests, batch_size) -> list[Completion]:
    """Fixed groups, each run to the end before the next starts.

    Order the requests by arrival (ties: their order in `requests`) and cut them into groups of
    exactly `batch_size` (the last group may be smaller). A group starts at the first step at
    which its last member has arrived and the previous group is done. Its first call feeds every
    member's whole prompt (one step, every member's first token); then one call per step feeds
    each unfinished member its newest token, until every member has max_new_tokens. Nobody joins
    a group while it runs. Returns one Completion per request, in the order of `requests`.

    Level 5. A member that has produced a stop token is done: it is fed no more, and the group
    runs until every member is done (has max_new_tokens tokens or has stopped), so a group of
    longest completion n runs n steps and the next group may start that much earlier.
    """
    # TODO(level 1): validate, form the groups, run each group to completion on the clock
    # TODO(level 5): a member is done at its first stop token (kept); check each request's stop
    raise NotImplementedError("level 1: static_batching is not implemented yet")


# Level 2: dynamic batching


def dynamic_batching(model, requests, max_batch_size, max_wait) -> list[Completion]:
    """Groups that start when full or when the oldest request has waited long enough.

    At each step at which no batch is running, look at the requests that have arrived and not
    been served, oldest first (ties: order in `requests`). Start a batch of the first
    max_batch_size of them if max_batch_size are waiting, or if the oldest has waited max_wait
    steps (step - arrival >= max_wait); otherwise the step passes idle. A batch runs like a
    static group (one prefill call, then one call per step) until every member is done.

    Level 5. As in static_batching: a member is done at max_new_tokens or at its first stop
    token, and the batch ends (the next may start) in the step after its last member is done.
    """
    # TODO(level 2): the same groups as level 1, formed by the two start rules
    # TODO(level 5): members done at their first stop token, as in static_batching
    raise NotImplementedError("level 2: dynamic_batching is not implemented yet")


# Levels 3 and 4: continuous batching


def continuous_batching(
    model, requests, max_batch_size, max_tokens_per_step=None, kv_blocks=None, block_size=16
) -> list[Completion]:
    """Iteration-level scheduling: every step, finished requests leave and arrived ones join.

    Level 3. At every step one call serves the running requests (at most max_batch_size of
    them) together: each running request's next token, and the whole prompt of each request
    that joins. A request leaves in the step its last token comes out, and arrived requests take
    free slots at once, first come first served (by arrival; ties: order in `requests`).

    Level 4. `max_tokens_per_step` caps the new tokens of one call: running requests are served
    first, oldest admitted first (a re-admission after a preemption counts from its step), each
    taking min(its pending tokens, what is left of the budget), so a long prompt is prefilled in
    chunks over several steps; waiting requests join while a slot and budget are left.
    `kv_blocks` caps KV memory: a request holding n tokens in its cache holds
    ceil(n / block_size) blocks, taken as its cache grows and all returned when it finishes or
    is preempted. A waiting request joins only when the blocks for the tokens it
    feeds this step (min(its pending tokens, the budget left)) are free, and as soon as they are,
    the step of a preemption included; the queue stops at the first that does not fit. When a
    running request's next tokens need a block and none is free, preempt the most recently admitted
    running request (possibly that one): free its blocks and its cache, put it back in the
    waiting queue (still ordered by arrival), and when it rejoins, feed its prompt and the
    tokens it had generated again (recompute) before it continues; its tokens and first_token
    are kept. Needing exactly the free blocks is a fit, never a reason to preempt. A chunk is
    never shrunk to fit the free blocks: it preempts, or does not join.

    Level 5. A request that produces a stop token is done: it leaves in that step like one that
    reached max_new_tokens, its slot and (level 4) all its blocks free at once, so a waiting
    request may join in the next step.
    """
    # TODO(level 3): a waiting queue, a running list, one forward_batch call per step
    # TODO(level 4): the token budget (chunked prefill), the block pool and preemption
    # TODO(level 5): a request whose newest token is a stop id leaves at once, freeing its blocks
    raise NotImplementedError("level 3: continuous_batching is not implemented yet")
