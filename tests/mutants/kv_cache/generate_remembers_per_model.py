"""Bug: generate remembers its decodings, keyed on the model and the prompt.

Decoding the same prompt with the same model twice gives the same tokens, so a memo looks
harmless; but the model's weights may change in place between the calls (a checkpoint loaded
into it), and the memo then answers with the old model's tokens.
"""

CAUGHT_BY = ["test_generate_follows_weights_changed_in_place_between_calls"]
EDITS = [
    (
        "@torch.no_grad()\n"
        "def generate(model, prompt_ids, max_new_tokens):\n"
        '    """Greedy decoding: one call on the whole prompt, then one call per new token."""\n'
        "    _check_generate_args(model, prompt_ids, max_new_tokens)\n",
        "_DECODED = {}\n"
        "\n"
        "\n"
        "@torch.no_grad()\n"
        "def generate(model, prompt_ids, max_new_tokens):\n"
        '    """Greedy decoding: one call on the whole prompt, then one call per new token."""\n'
        "    _check_generate_args(model, prompt_ids, max_new_tokens)\n"
        "    key = (id(model), tuple(prompt_ids.flatten().tolist()), prompt_ids.shape)\n"
        "    key = (*key, max_new_tokens)\n"
        "    if key not in _DECODED:\n"
        "        _DECODED[key] = _generate(model, prompt_ids, max_new_tokens)\n"
        "    return _DECODED[key].clone()\n"
        "\n"
        "\n"
        "@torch.no_grad()\n"
        "def _generate(model, prompt_ids, max_new_tokens):\n",
    ),
]
