"""The judging helpers: tolerances, cost counters, figures, and the --impl contract."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from grading.judge.cost import CountingModel, count_flops, held_bytes, largest_tensor
from grading.judge.figures import FigureLog, markdown_table
from grading.judge.impl import REPO_ROOT, ImplError, kata_of, resolve_impl
from grading.judge.oracles import attention_oracle
from grading.judge.tolerance import TOLERANCES, assert_close, assert_error_within, error_floor
from grading.model import make_model


@pytest.mark.parametrize("dtype", list(TOLERANCES))
def test_zeros_never_pass(dtype):
    expected = torch.randn(5, 7, dtype=torch.float64) * 1e-3
    with pytest.raises(AssertionError, match="not close"):
        assert_close(torch.zeros(5, 7, dtype=dtype), expected)
    with pytest.raises(AssertionError):
        assert_close((expected * 1.05).to(dtype), expected)  # 5% off
    assert_close(expected.to(dtype), expected)  # rounding to the dtype is fine


def test_failure_message_says_where_and_how_much():
    expected = torch.ones(2, 3, dtype=torch.float64)
    actual = expected.clone().float()
    actual[1, 2] = 2.0
    with pytest.raises(AssertionError) as info:
        assert_close(actual, expected, hint="look at the last column")
    message = str(info.value)
    for piece in ("(1, 2)", "expected 1", "got 2", "max abs error 1", "(2, 3)", "last column"):
        assert piece in message
    with pytest.raises(AssertionError, match="shape"):
        assert_close(torch.ones(3, 2), expected)
    with pytest.raises(AssertionError, match="NaN"):
        assert_close(torch.full((2, 3), float("nan")), expected)


def test_a_small_miss_is_called_a_precision_problem():
    expected = torch.randn(4, 8, dtype=torch.float64)
    with pytest.raises(AssertionError, match="precision: the worst error is only"):
        assert_close((expected * 1.006).half(), expected, hint="read the blocks in order")
    with pytest.raises(AssertionError) as info:
        assert_close(expected.flip(0).half(), expected)  # a wrong result, not a rounding one
    assert "precision" not in str(info.value)


def test_error_within_a_baseline():
    oracle = torch.randn(64, dtype=torch.float64)
    baseline = oracle.half()
    assert_error_within(oracle.half(), oracle, baseline)
    with pytest.raises(AssertionError, match="baseline"):
        assert_error_within((oracle * 1.01).half(), oracle, baseline)


def test_a_lucky_baseline_does_not_fail_a_correct_float32_result():
    oracle = torch.randn(64, dtype=torch.float64) * 10
    scale = float(oracle.abs().max())
    exact = oracle.float()  # a baseline that happened to round perfectly
    rounded = (oracle + 7e-6 * scale).float()  # what a correct float32 chain can accumulate
    assert_error_within(rounded, oracle, exact)
    assert error_floor(torch.float32, scale) < 1e-4 * scale
    with pytest.raises(AssertionError, match="baseline"):
        assert_error_within((oracle + 1e-4 * scale).float(), oracle, exact)  # a real bug


def test_flops_of_a_matmul():
    a, b = torch.randn(4, 5), torch.randn(5, 6)
    out, flops = count_flops(torch.matmul, a, b)
    assert flops == 2 * 4 * 5 * 6 and out.shape == (4, 6)


def test_flops_of_attention_on_the_cpu_are_counted():
    q, k, v = torch.randn(2, 4, 16, 8), torch.randn(2, 2, 32, 8), torch.randn(2, 2, 32, 8)
    expected = 2 * 2 * 4 * 16 * 32 * (8 + 8)
    _, flops = count_flops(
        torch.nn.functional.scaled_dot_product_attention, q, k, v, enable_gqa=True
    )
    assert flops == expected
    mask = torch.ones(16, 32, dtype=torch.bool)
    _, flops = count_flops(
        torch.nn.functional.scaled_dot_product_attention, q, k, v, attn_mask=mask, enable_gqa=True
    )
    assert flops == expected


def test_largest_tensor_ignores_views():
    x = torch.randn(10, 10)

    def work():
        y = x.expand(50, 10, 10)  # a view: no memory
        return y.sum(0) + x.repeat(3, 1)[:10]

    _, record = largest_tensor(work)
    assert record.numel == 300 and record.shape == (30, 10)


def test_held_bytes_counts_each_storage_once():
    class Cache:
        def __init__(self):
            self.k = torch.zeros(4, 8)  # 128 bytes
            self.views = [self.k[:2], {"v": torch.zeros(3, dtype=torch.float16)}]  # + 6 bytes

    assert held_bytes(Cache()) == 4 * 8 * 4 + 3 * 2


def test_the_model_logs_its_own_calls():
    model = make_model(0, max_seq_len=16)
    model(torch.zeros(2, 5, dtype=torch.long))
    counting = CountingModel(model)
    assert counting is model and model.calls == [], "no wrapper: the same model, log emptied"
    with torch.no_grad():
        model(torch.zeros(2, 5, dtype=torch.long))
    model(torch.zeros(2, 1, dtype=torch.long))
    assert model.tokens_fed == [5, 1]
    assert [c.grad_enabled for c in model.calls] == [False, True]


def test_figures_round_trip(tmp_path):
    log = FigureLog()
    log.record("speed-up", 2.5, "x", n=4096)
    log.write_json(tmp_path / "f.json")
    data = json.loads((tmp_path / "f.json").read_text())
    assert data[0]["value"] == 2.5 and data[0]["context"] == {"n": 4096}
    assert "| speed-up | 2.5 | x | n=4096 |" in markdown_table(data)


def test_attention_oracle_conventions():
    q = torch.randn(1, 4, 2, 8)
    k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    out = attention_oracle(q, k, v, causal=True)
    # Query 0 of 2 sits at position 3 of 5 (bottom-right): it sees keys 0..3.
    scores = (q[0, 0, 0].double() @ k[0, 0, :4].double().T) / 8**0.5
    want = scores.softmax(-1) @ v[0, 0, :4].double()
    assert torch.allclose(out[0, 0, 0], want)
    # Head 3 reads kv head 3 // 2 = 1.
    scores = (q[0, 3, 1].double() @ k[0, 1].double().T) / 8**0.5
    assert torch.allclose(out[0, 3, 1], scores.softmax(-1) @ v[0, 1].double())
    none = attention_oracle(q, k, v, mask=torch.zeros(2, 5, dtype=torch.bool))
    assert torch.equal(none, torch.zeros_like(none)), "rows that see no key are zeros"


def test_impl_choices_resolve():
    assert resolve_impl("kv_cache", None) == REPO_ROOT / "katas/kv_cache/solution.py"
    assert resolve_impl("kv_cache", "reference") == REPO_ROOT / "reference/kv_cache.py"
    with pytest.raises(ImplError, match="no file"):
        resolve_impl("kv_cache", "no/such/file.py")
    assert kata_of(REPO_ROOT / "katas/kv_cache/test_kv_cache.py") == "kv_cache"


def test_impl_by_path_outside_the_repository(tmp_path, kata_runner):
    outside = tmp_path / "my_solution.py"
    shutil.copy(REPO_ROOT / "reference/kv_cache.py", outside)
    run = kata_runner("kv_cache", f"--impl={outside}", "-k", "bytes")
    assert run.returncode == 0, run.tail()


def test_impl_that_does_not_exist_is_a_clear_error(kata_runner):
    run = kata_runner("kv_cache", "--impl=nowhere.py", "-k", "bytes_formula")
    assert run.returncode == 1 and "no file" in run.output, run.tail()
    assert "Traceback" not in run.output
