"""Cheat: rope_cos_sin in Python, each position read with `.item()`.

No `.tolist()` at all: one number at a time, `.item()` hands the positions to Python, where
their products with the frequencies, cosines and sines run with no counter watching. Caught
because every `.item()` (and `float(t)`, `int(t)`) of a number to compute with counts toward the
same per-call limit as an element of `.tolist()`.
"""

KATA = "context_extension"
TESTS = ["test_rope_cos_sin_of_a_long_prompt"]
EXPECT = "numbers, one by one into Python, 257 integer or floating-point elements in this call"
REPLACE = {
    "rope_cos_sin": """
        def rope_cos_sin(positions, inv_freq):
            if positions.dim() != 1:
                raise ValueError(f"positions: expected a 1-D tensor [N], got {positions.dim()}-D")
            if inv_freq.dim() != 1:
                raise ValueError(f"inv_freq: expected a 1-D tensor [D/2], got {inv_freq.dim()}-D")
            freqs = inv_freq.tolist()  # D/2 floats: within the limit
            rows_cos, rows_sin = [], []
            for n in range(positions.shape[0]):
                p = positions[n].item()
                angles = [float(p) * f for f in freqs]
                rows_cos.append([math.cos(a) for a in angles] * 2)
                rows_sin.append([math.sin(a) for a in angles] * 2)
            shape = (len(rows_cos), 2 * len(freqs))
            cos = torch.tensor(rows_cos, dtype=torch.float32).reshape(shape)
            sin = torch.tensor(rows_sin, dtype=torch.float32).reshape(shape)
            return cos, sin
    """,
}
