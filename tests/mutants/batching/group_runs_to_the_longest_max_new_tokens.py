"""Bug: a static or dynamic group occupies max(max_new_tokens) steps even when members stopped.

Planning a group's length up front (`for _ in range(max(r.max_new_tokens for r in group))`) was
right before stop tokens existed. With them, a group whose members have all stopped sits idle
for the rest of its planned steps, and the next group starts that much later than the README's
rule (a group is done when every member is done) allows.
"""

CAUGHT_BY = [
    "test_static_groups_end_when_every_member_is_done",
    "test_dynamic_batches_end_when_every_member_is_done",
]
REPLACE = {
    "_run_to_completion": """
        def _run_to_completion(model, group, step):
            for _ in range(max(s.request.max_new_tokens for s in group)):
                batch = [(s, len(s.pending)) for s in group if not s.done]
                if batch:
                    _run_step(model, batch, step)
                step += 1
            return step
    """,
}
