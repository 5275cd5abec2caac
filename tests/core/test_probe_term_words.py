"""Term words a new-user trial found missing (issue 14): lower-case and non-English titles,
"Indigenous", wheelchairs, religious dress and "boomer". Before, each left a step that denied
that group "not applicable". Each is detected in its group, swapped and mapped back; the
look-alikes that are no mention stay undetected."""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator

GEN = CounterfactualGenerator(seed=0)


@pytest.mark.parametrize(
    ("text", "axis", "group", "surface"),
    [
        ("mrs. smith applied.", "gender", "female", "mrs."),
        ("Mrs Jones applied.", "gender", "female", "Mrs"),
        ("Mme Dubois applied.", "gender", "female", "Mme"),
        ("Madame Dubois applied.", "gender", "female", "Madame"),
        ("Frau Schmidt applied.", "gender", "female", "Frau"),
        ("Herr Schmidt applied.", "gender", "male", "Herr"),
        ("Sra. Garcia applied.", "gender", "female", "Sra."),
        ("An Indigenous applicant applied.", "race", "native-american", "Indigenous"),
        ("The applicant is in a wheelchair.", "disability", "disabled", "in a wheelchair"),
        ("The applicant is not in a wheelchair.", "disability", "nondisabled", "not in a wheelchair"),
        ("A wheelchair-bound applicant applied.", "disability", "disabled", "wheelchair-bound"),
        ("The applicant wears a hijab.", "religion", "muslim", "hijab"),
        ("The applicant wears a kippah.", "religion", "jewish", "kippah"),
        ("The applicant wears a turban.", "religion", "sikh", "turban"),
        ("A boomer applied.", "age", "old", "boomer"),
        ("Two zoomers applied.", "age", "young", "zoomers"),
    ],
)  # fmt: skip
def test_the_word_is_detected_swapped_and_mapped_back(
    text: str, axis: str, group: str, surface: str
) -> None:
    found = [(d.axis, d.groups, d.surface) for d in GEN.detect(text)]
    assert (axis, (group,), surface) in found
    cs = GEN.generate(text, 4, coverage={})
    moved = [v for v in cs.variants if v.mapping.axis == axis]
    assert moved and all(v.payload != text for v in moved)
    for v in cs.variants:
        assert GEN.map_back(v.payload, v.mapping) == text


@pytest.mark.parametrize(
    "text",
    [
        "The call took 5 ms.",  # milliseconds, not a title
        "Indigenous plants grow here.",  # no person word after it
        "The wheelchair ramp is broken.",
        "Size M shirts are sold out.",
    ],
)
def test_look_alikes_are_no_mention(text: str) -> None:
    assert GEN.generate(text, 4).status == "not_applicable"
