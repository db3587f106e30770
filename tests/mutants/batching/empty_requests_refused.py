"""Bug: an empty list of requests is refused with a ValueError.

Checking "at least one request" reads like input validation, but nothing is wrong with serving
nobody: the README's answer is an empty list of Completions, with no model call.
"""

CAUGHT_BY = ["test_an_empty_list_of_requests_is_served_with_no_model_call"]
EDITS = [
    (
        "    config, seen = model.config, set()\n",
        "    if not requests:\n"
        '        raise ValueError("requests: expected at least one request")\n'
        "    config, seen = model.config, set()\n",
    ),
]
