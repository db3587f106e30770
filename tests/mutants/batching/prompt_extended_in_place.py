"""Bug: the caller's prompt lists are extended with the generated tokens.

Keeping "the sequence so far" in the request's own prompt (`request.prompt.extend(tokens)`)
serves every request right, but hands the caller back requests that are not the ones it gave:
run the same list twice and every prompt has grown.
"""

CAUGHT_BY = ["test_static_groups_are_exactly_as_defined"]
EDITS = [
    (
        '    """In the order of `requests`."""\n    return [\n',
        '    """In the order of `requests`."""\n'
        "    for s in seqs:\n        s.request.prompt.extend(s.generated)\n    return [\n",
    ),
]
