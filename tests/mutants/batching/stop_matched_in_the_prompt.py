"""Bug: a stop id is looked for in the whole sequence, prompt included.

Keeping one list of prompt plus generated tokens and asking `set(stop) & set(tokens)` finds the
stop id the prompt already holds: such a request ends after its first token. The README matches
generated tokens only; a stop id in the prompt means nothing.
"""

CAUGHT_BY = [
    "test_a_stop_id_in_the_prompt_means_nothing",
    "test_static_groups_end_when_every_member_is_done",
]
EDITS = [
    (
        "bool(self.generated) and self.generated[-1] in self.request.stop",
        "bool(self.generated)\n"
        "            and not set(self.request.stop).isdisjoint("
        "self.request.prompt + self.generated)",
    ),
]
