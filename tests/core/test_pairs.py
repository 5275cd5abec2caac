"""Scoring pre-computed pairs: the JSONL format, its errors, neutralisation modes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from biasbreaker.errors import InputError
from biasbreaker.probe import ResponsePair, read_pairs, score_pairs


class Exact:
    name = "exact"
    compares_neutralised = True

    def divergence(self, a: Sequence[str], b: Sequence[str]) -> list[float]:
        return [0.0 if x == y else 1.0 for x, y in zip(a, b, strict=True)]

    def report(self, a: Sequence[str], b: Sequence[str]) -> Mapping[str, float]:
        return {"identical share": sum(x == y for x, y in zip(a, b, strict=True)) / len(a)}


class RawExact(Exact):
    name = "raw"
    compares_neutralised = False


def write(tmp_path: Path, lines: list[object]) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_read_pairs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {"original": "He is fit.", "counterfactual": "She is fit.", "id": 7},
            "",
            {
                "original": "a",
                "counterfactual": "b",
                "axis": "gender",
                "groups": [["male", "female"], ["female", "male"]],
            },
        ],
    )
    pairs = read_pairs(path)
    assert pairs[0] == ResponsePair("He is fit.", "She is fit.", id="7")
    assert pairs[1].groups == (("male", "female"), ("female", "male"))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"pairs.jsonl:2: not valid JSON"),
        ("[1, 2]", r"pairs.jsonl:2: expected a JSON object"),
        (
            {"original": "x"},
            r"pairs.jsonl:2: field 'counterfactual' is missing; every line needs 'original' and "
            r"'counterfactual'",
        ),
        (
            {"original": "x", "counterfactual": None},
            r"pairs.jsonl:2: field 'counterfactual' = null must be a string",
        ),
        (
            {"original": "x", "counterfactual": "y", "orignal": "z"},
            r"pairs.jsonl:2: unknown key\(s\) \['orignal'\]",
        ),
        (
            {"original": "x", "counterfactual": "y", "axis": "gender"},
            r"pairs.jsonl:2: 'axis' = \"gender\" is given without 'groups'; give 'axis' and 'groups'",
        ),
        (
            {"original": "x", "counterfactual": "y", "axis": "gender", "groups": ["male"]},
            r"pairs.jsonl:2: 'axis' must",
        ),
        (
            {"original": "x", "counterfactual": "y", "resample": 3},
            r"pairs.jsonl:2: field 'resample'",
        ),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: object, message: str) -> None:
    path = write(tmp_path, [{"original": "ok", "counterfactual": "ok"}, line])
    with pytest.raises(InputError, match=message):
        read_pairs(path)


def test_resamples_on_all_lines_or_none(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {"original": "a", "counterfactual": "b", "resample": "c"},
            {"original": "a", "counterfactual": "b"},
        ],
    )
    with pytest.raises(InputError, match="1 of 2 lines have 'resample'"):
        read_pairs(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no pairs"):
        read_pairs(write(tmp_path, [""]))
    with pytest.raises(InputError, match="cannot read"):
        read_pairs(tmp_path / "absent.jsonl")


def test_neutralisation_modes() -> None:
    pair = ResponsePair(
        "He thanked his wife.",
        "She thanked her husband.",
        resample="He thanked his wife!",
        axis="gender",
        groups=(("male", "female"), ("female", "male")),
    )
    for mode, expected in (("auto", 0.0), ("map-back", 0.0), ("mask", 0.0), ("none", 1.0)):
        report = score_pairs([pair], [Exact(), RawExact()], neutralisation=mode, bootstrap=0)
        exact, raw = report.scorers
        assert exact.counterfactual == expected, mode
        assert raw.counterfactual == 1.0  # raw scorers always see the raw text
        assert exact.same_group == 1.0
        assert exact.excess == expected - 1.0
        assert exact.reported == {"identical share": 1.0 - expected}


def test_map_back_needs_groups() -> None:
    with pytest.raises(InputError, match="needs 'axis' and 'groups'"):
        score_pairs([ResponsePair("a", "b")], [Exact()], neutralisation="map-back")


def test_report_is_json_and_has_intervals() -> None:
    pairs = [ResponsePair(f"He won {i}.", f"She won {i % 3}.") for i in range(30)]
    report = score_pairs(pairs, [Exact()], neutralisation="mask", seed=3)
    data = json.loads(json.dumps(report.to_dict()))
    ci = data["scorers"][0]["counterfactual_ci"]
    assert ci[0] <= data["scorers"][0]["counterfactual"] <= ci[1]
    assert data["with_resamples"] is False


# --- axis and group names are checked (new-user report, bug 6) -----------------------------


def _pairs_file(tmp_path: Path, **line: object) -> Path:
    base = {"original": "He is great", "counterfactual": "She is great"}
    return write(tmp_path, [{"original": "ok", "counterfactual": "ok"}, {**base, **line}])


def test_a_misspelt_group_names_file_line_value_and_groups(tmp_path: Path) -> None:
    path = _pairs_file(tmp_path, axis="gender", groups=[["male", "femal"], ["female", "male"]])
    pairs = read_pairs(path)
    with pytest.raises(InputError) as info:
        score_pairs(pairs, [Exact()], bootstrap=0)
    message = str(info.value)
    assert message.startswith(f"{path}:2: groups [['male', 'femal'], ['female', 'male']]")
    assert "'femal' is not a group of axis 'gender'; its groups: male, female" in message
    # spelt right, the swap maps back and the pair is identical
    path = _pairs_file(tmp_path, axis="gender", groups=[["male", "female"], ["female", "male"]])
    report = score_pairs(read_pairs(path), [Exact()], bootstrap=0)
    assert report.scorers[0].counterfactual == 0.0


def test_an_unknown_axis_names_file_line_and_the_loaded_axes(tmp_path: Path) -> None:
    path = _pairs_file(tmp_path, axis="gendr", groups=[["male", "female"]])
    with pytest.raises(InputError) as info:
        score_pairs(read_pairs(path), [Exact()], neutralisation="map-back", bootstrap=0)
    message = str(info.value)
    assert message.startswith(f"{path}:2: axis 'gendr' is not loaded; loaded axes: gender, race")


def test_an_unknown_mask_axis_is_an_error() -> None:
    with pytest.raises(InputError, match="mask axis 'gendr' is not loaded; loaded axes: gender"):
        score_pairs(
            [ResponsePair("He won.", "She won.")],
            [Exact()],
            neutralisation="mask",
            mask_axes=["gendr"],
        )


def test_a_map_back_failure_names_the_file_and_line(tmp_path: Path) -> None:
    # two groups sent to one: the mapping has no inverse
    path = _pairs_file(tmp_path, axis="gender", groups=[["male", "female"], ["female", "female"]])
    with pytest.raises(InputError, match=rf"^{path}:2: cannot map back with"):
        score_pairs(read_pairs(path), [Exact()], bootstrap=0)
