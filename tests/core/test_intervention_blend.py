import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.errors import InputError
from biasbreaker.intervention.blend import blend


def test_text_takes_the_correction_at_or_above_half():
    assert blend("biased", "fixed", 0.5) == "fixed"
    assert blend("biased", "fixed", 0.49) == "biased"


def test_numbers_blend_linearly():
    assert blend(0.8, 0.2, 0.75) == pytest.approx(0.35)
    assert blend(10, 20, 0.5) == 15 and isinstance(blend(10, 20, 0.5), int)
    assert blend(10, 11, 0.5) == 10.5


def test_rankings_and_categories_switch_as_a_whole():
    assert blend(["ann", "bob", "cy"], ["cy", "ann", "bob"], 0.9) == ["cy", "ann", "bob"]
    assert blend(["ann", "bob"], ["bob", "ann"], 0.2) == ["ann", "bob"]
    assert blend(True, False, 0.7) is False
    assert blend([1, 2], [3, 4], 0.5) == [2, 3]


def test_objects_blend_key_by_key():
    original = {"score": 0.9, "hire": "yes", "old": 1}
    corrected = {"score": 0.5, "hire": "no", "new": 2}
    assert blend(original, corrected, 0.75) == {"score": pytest.approx(0.6), "hire": "no", "new": 2}
    assert blend(original, corrected, 0.25)["old"] == 1


@pytest.mark.parametrize("m", [-0.1, 1.1, math.nan, "0.5"])
def test_bad_ratio(m):
    with pytest.raises(InputError, match="mixing ratio"):
        blend("a", "b", m)


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.floats(0, 1))
def test_numeric_blend_lies_between_the_inputs(a, b, m):
    out = blend(a, b, m)
    assert min(a, b) - 1e-6 <= out <= max(a, b) + 1e-6
    assert blend(a, b, 1.0) == pytest.approx(b) and blend(a, b, 0.0) == pytest.approx(a)
