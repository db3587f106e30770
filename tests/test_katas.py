"""The repository proves its own tests: references pass, stubs fail kindly, APIs match."""

from __future__ import annotations

import inspect

import pytest

from grading.judge.impl import KATAS_DIR, REPO_ROOT, kata_names, load_module

KATAS = kata_names()


def test_every_kata_is_complete():
    assert KATAS, "no kata found under katas/"
    for kata in KATAS:
        for path in (
            KATAS_DIR / kata / "README.md",
            KATAS_DIR / kata / "solution.py",
            REPO_ROOT / "reference" / f"{kata}.py",
        ):
            assert path.is_file(), f"{kata}: missing {path.relative_to(REPO_ROOT)}"
        assert list((KATAS_DIR / kata).glob("test_*.py")), f"{kata}: no test_*.py"


@pytest.mark.parametrize("kata", KATAS)
def test_reference_passes(kata, kata_runner):
    # Only the drawn tests (Hypothesis marks them), under the `ci` profile's fixed examples (the
    # ones every mutant is judged on): every other test gives the same verdict under every profile
    # and seed, and tests/test_grade.py grades each reference's whole suite once, on random
    # examples (test_every_reference_scores_full_marks).
    run = kata_runner(kata, "--impl", "reference", "-m", "hypothesis")
    assert run.returncode == 0, f"reference/{kata}.py fails its kata's tests:\n{run.tail()}"


@pytest.mark.parametrize("kata", KATAS)
def test_untouched_stub_fails_kindly(kata, kata_runner):
    run = kata_runner(kata, "-x")
    pointer = f"not implemented yet — start with katas/{kata}/README.md"
    assert run.returncode == 1, f"the stub of {kata} should fail its tests:\n{run.tail()}"
    assert pointer in run.output, f"the stub's failure should say {pointer!r}:\n{run.tail()}"
    for noise in ("Traceback", "Error:", "raise NotImplementedError"):
        assert noise not in run.output, f"the stub's failure shows {noise!r}:\n{run.tail()}"
    assert len(run.output.splitlines()) < 25, f"the stub's failure is too long:\n{run.output}"


def public_api(path) -> dict[str, str]:
    """Public functions, classes and their public members, with signatures, defined in `path`."""
    module = load_module(path, f"api_of.{path.parent.name}.{path.stem}")
    api = {}
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            api[name] = str(inspect.signature(obj))
        elif inspect.isclass(obj):
            api[name] = "class"
            for member, value in vars(obj).items():
                if member.startswith("_") and member != "__init__":
                    continue
                if isinstance(value, property):
                    api[f"{name}.{member}"] = "property"
                elif isinstance(value, (staticmethod, classmethod)):
                    api[f"{name}.{member}"] = str(inspect.signature(value.__func__))
                elif inspect.isfunction(value):
                    api[f"{name}.{member}"] = str(inspect.signature(value))
    return api


@pytest.mark.parametrize("kata", KATAS)
def test_stub_and_reference_share_one_api(kata):
    stub = public_api(KATAS_DIR / kata / "solution.py")
    reference = public_api(REPO_ROOT / "reference" / f"{kata}.py")
    missing = sorted(set(reference) - set(stub))
    extra = sorted(set(stub) - set(reference))
    assert not missing and not extra, f"{kata}: only in reference {missing}; only in stub {extra}"
    differ = {name: (stub[name], reference[name]) for name in stub if stub[name] != reference[name]}
    assert not differ, f"{kata}: signatures differ (stub, reference): {differ}"
