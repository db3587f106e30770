"""The transformers baselines the serving benchmark measures against compute the same tokens."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="needs the `models` extra")

from grading.model import greedy_generate_no_cache, make_model  # noqa: E402
from grading.model.baselines import (  # noqa: E402
    as_transformers,
    transformers_continuous,
    transformers_static,
)
from grading.model.naive import Request  # noqa: E402


@pytest.mark.parametrize("n_experts", [0, 4])
def test_transformers_generation_gives_the_same_greedy_tokens(n_experts):
    model = make_model(0, torch.float32, n_experts=n_experts)
    gen = torch.Generator().manual_seed(1)
    requests = [
        Request(i, torch.randint(0, 64, (2 + 3 * i,), generator=gen).tolist(), 4 + i, arrival=i)
        for i in range(5)
    ]
    expected = [
        greedy_generate_no_cache(model, torch.tensor([r.prompt]), r.max_new_tokens)[0][
            len(r.prompt) :
        ].tolist()
        for r in requests
    ]
    hf = as_transformers(model)
    assert transformers_static(hf, requests, max_batch_size=2) == expected
    assert transformers_static(hf, requests, max_batch_size=3, cache="dynamic") == expected
    continuous = transformers_continuous(hf, requests, max_batch_size=4)
    assert continuous is None or continuous == expected
