"""Bug: rope_cos_sin remembers its tables under a summary of its inputs (sum, sum of squares).

Fresh values and values changed in place change the summary, so most checks see new numbers; but
the same positions in another order have the same summary and get the earlier call's rows.
"""

CAUGHT_BY = ["test_rope_answers_follow_their_inputs"]
EDITS = [
    (
        "def rope_cos_sin(\n",
        "_TABLES: dict = {}\n\n\ndef rope_cos_sin(\n",
    ),
    (
        "    angles = torch.cat([angles, angles], dim=-1)  # (N, D): pair i is (i, i + D/2)\n"
        "    return angles.cos().to(torch.float32), angles.sin().to(torch.float32)\n",
        "    angles = torch.cat([angles, angles], dim=-1)  # (N, D): pair i is (i, i + D/2)\n"
        "    p, f = positions.double(), inv_freq.double()\n"
        "    key = (positions.shape, inv_freq.shape, p.sum().item(), (p * p).sum().item(),\n"
        "           f.sum().item(), (f * f).sum().item())\n"
        "    cos, sin = angles.cos().to(torch.float32), angles.sin().to(torch.float32)\n"
        "    if key in _TABLES:\n"
        "        return _TABLES[key][0].clone(), _TABLES[key][1].clone()\n"
        "    _TABLES[key] = (cos.clone(), sin.clone())\n"
        "    return cos, sin\n",
    ),
]
