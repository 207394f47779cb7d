"""Thresholds of a step function of the accumulator and the requantization that takes them."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fpganet.quantize.fixed_point import requantize
from fpganet.quantize.thresholds import fit_requantization, step_thresholds


def _levels(steps, low):
    def function(a):
        return np.searchsorted(steps, a, side="right") + low
    return function


@given(st.lists(st.integers(-5000, 5000), min_size=1, max_size=6), st.integers(-128, 120))
@settings(max_examples=200, deadline=None)
def test_step_thresholds_find_every_step(steps, low_code):
    steps = np.sort(np.asarray(steps, np.int64))
    low, high = np.array([-6000], np.int64), np.array([6000], np.int64)
    found = step_thresholds(lambda a: _levels(steps, low_code)(a), low, high, len(steps))
    assert np.array_equal(found[0], steps)


def _check(fit, steps, code_low, low, high, zp, lo, hi):
    a = np.arange(low, high + 1, dtype=np.int64)
    expected = np.clip(code_low + np.searchsorted(steps, a, side="right"), lo, hi)
    got = requantize((a + fit.bias).reshape(1, 1, -1), [fit.mult], [fit.shift], zp, lo, hi)
    return np.array_equal(got.ravel().astype(np.int64), expected)


@given(st.integers(-3000, 3000), st.integers(-128, 127), st.sampled_from([1, 15]))
@settings(max_examples=200, deadline=None)
def test_one_step_always_fits_exactly(step, zp, bits):
    """A binary quantizer (one step) has an exact requantization whatever the output offset,
    with 15-bit multipliers or 1-bit ones (shifts only)."""
    steps = np.array([step], np.int64)
    low, high = step - 500, step + 500
    fit = fit_requantization(steps, 0, low, high, zp, 0, 1, bits)
    assert fit.misses == 0 and _check(fit, steps, 0, low, high, zp, 0, 1)


@given(st.integers(-3000, 3000), st.integers(1, 400))
@settings(max_examples=200, deadline=None)
def test_two_steps_fit_exactly_at_an_offset_away_from_the_codes(first, gap):
    """A ternary quantizer (two steps) fits exactly when the output offset lies away from the
    codes (here -128, which the layer quantizer tries after the zero code): at an offset
    next to them the step spacing would have to be an exact binary fraction."""
    steps = np.array([first, first + gap], np.int64)
    low, high = first - 500, first + gap + 500
    fit = fit_requantization(steps, -1, low, high, -128, -1, 1)
    assert fit.misses == 0 and _check(fit, steps, -1, low, high, -128, -1, 1)


def test_evenly_spaced_steps_fit_and_uneven_ones_are_counted():
    """Steps of a uniform 4-bit quantizer after an affine map fit (at an offset away from the
    codes); an irregular set is reported."""
    even = np.ceil(np.arange(1, 16) * 37.3 + 10).astype(np.int64)
    fit = fit_requantization(even, 0, -100, 1000, -128, 0, 15)
    assert fit.misses == 0 and _check(fit, even, 0, -100, 1000, -128, 0, 15)
    uneven = np.array([0, 3, 50, 51, 400], np.int64)
    fit = fit_requantization(uneven, 0, -100, 1000, 0, 0, 5)
    assert fit.misses > 0


def test_a_constant_channel_has_no_fit():
    assert fit_requantization(np.array([5000], np.int64), 3, -10, 10, 0, 0, 7) is None
