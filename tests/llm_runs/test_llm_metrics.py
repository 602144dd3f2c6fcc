"""pass@k against exact integer binomials, avg@n and the macro average."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_runs.metrics import (
    PASS_AT_K,
    avg_at_n,
    ks_for,
    macro_average,
    mean_pass_at_k,
    pass_at_k,
    pass_at_k_exact,
)


def exact_fraction(n: int, c: int, k: int) -> Fraction:
    """1 - C(n-c, k) / C(n, k) as an exact rational (Python integers only)."""
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def test_pass_at_k_matches_exact_binomials_on_random_triples() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        n = rng.randint(1, 64)
        c = rng.randint(0, n)
        k = rng.randint(1, n)
        assert pass_at_k(n, c, k) == pytest.approx(float(exact_fraction(n, c, k)), abs=1e-12)


@given(
    st.integers(1, 200).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_at_k_property(triple: tuple[int, int, int]) -> None:
    n, c, k = triple
    value = pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(float(exact_fraction(n, c, k)), abs=1e-12)
    assert value == pytest.approx(pass_at_k_exact(n, c, k), abs=1e-12)
    if k < n:  # a larger budget never hurts
        assert pass_at_k(n, c, k + 1) >= value - 1e-15


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (16, 0, 1, 0.0),
        (16, 16, 16, 1.0),
        (16, 4, 1, 0.25),
        (2, 1, 1, 0.5),
        (4, 1, 2, 0.5),
        (4, 3, 2, 1.0),
    ],
)
def test_pass_at_k_hand_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_1_is_the_fraction_correct() -> None:
    for n in range(1, 20):
        for c in range(n + 1):
            assert pass_at_k(n, c, 1) == pytest.approx(c / n)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_ks_and_mean_pass_at_k() -> None:
    assert PASS_AT_K == (1, 2, 4, 8, 16)
    assert ks_for(8) == [1, 2, 4, 8]
    assert ks_for(16) == [1, 2, 4, 8, 16]
    assert ks_for(3) == [1, 2]
    means = mean_pass_at_k([0, 2, 4], 4)
    assert set(means) == {1, 2, 4}
    assert means[1] == pytest.approx((0 + 0.5 + 1) / 3)
    assert means[4] == pytest.approx((0 + 1 + 1) / 3)


def test_avg_at_n_and_macro() -> None:
    assert avg_at_n([[True, False], [True, True]]) == pytest.approx(0.75)
    assert macro_average({"a": 0.2, "b": 0.4, "c": 0.9}) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        avg_at_n([])
    with pytest.raises(ValueError):
        macro_average({})
