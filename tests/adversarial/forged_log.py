"""Cheat: one model call per row, logged as one batched call per step.

The schedule tests read the shared model's own log (`model.batch_log`, `model.calls`), which is
a plain list: this cheat serves each row of a step in a call of its own, then removes those
entries and appends the batched call that should have happened. Caught because the log is
checked against the work that really ran: a dispatch mode of the judge counts the rows every
product multiplies through the model's own weights, and the head ran once per row, not once
per logged call.
"""

KATA = "batching"
TESTS = ["test_static_groups_are_exactly_as_defined"]
EXPECT = "model log: the model's weight lm_head ran in 6 products over 9 rows"
REPLACE = {
    "_run_step": """
        @torch.no_grad()
        def _run_step(model, batch, step):
            from grading.model import BatchCall, ModelCall

            device = next(model.parameters()).device
            for seq, _ in batch:
                if seq.cache is None:
                    seq.cache = SequenceCache(model.config)
            rows = [torch.tensor(seq.pending[:n], device=device) for seq, n in batch]
            before, calls = len(model.batch_log), len(model.calls)
            logits = [model.forward_batch([r], [s.cache])[0] for r, (s, _) in zip(rows, batch)]
            forged = tuple(row for call in model.batch_log[before:] for row in call.rows)
            del model.batch_log[before:], model.calls[calls:]
            model.batch_log.append(BatchCall(forged))
            fed = sum(len(row.tokens) for row in forged)
            model.calls.append(ModelCall(fed, len(forged), None, False))
            for (seq, _), out in zip(batch, logits):
                if not seq.pending:
                    seq.generated.append(int(out[-1].argmax()))
                    if seq.first_token is None:
                        seq.first_token = step
                    if seq.done:
                        seq.finished = step
    """,
}
