import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.errors import AggregatorError, ConfigError
from biasbreaker.hookspecs import hookimpl
from biasbreaker.intervention.invariants import anonymise, check_panel_result
from biasbreaker.intervention.panel import SkepticPanel
from biasbreaker.intervention.types import (
    AnonymousVerdict,
    PanelResult,
    PrunedVerdict,
    ReviewRequest,
    SkepticVerdict,
    TrackRecord,
)
from biasbreaker.kernel import Kernel
from biasbreaker_plugins import aggregators as agg_plugin
from biasbreaker_plugins.aggregators import (
    TrustAggregator,
    TrustOptions,
    UniformAggregator,
    normalised_entropy,
    vote,
)
from intervention_doubles import StaticSkeptic

AGGREGATORS = {
    "uniform": UniformAggregator(),
    "trust": TrustAggregator(TrustOptions(), overconfidence=0.9),
    "trust-certainty": TrustAggregator(TrustOptions(s_mode="certainty"), overconfidence=0.9),
}


def anon(label, decision, conf, *, evidence=(), r=0.5, i=0.5, revision=None):
    return AnonymousVerdict(
        label=label,
        decision=decision,
        confidence=conf,
        evidence=evidence,
        reliability=r,
        domain_match=i,
        revision=revision if decision != "stands" else None,
    )


def run(aggregator, verdicts, record=None, attributes=()):
    anonymous = anonymise(verdicts, track_record=record, attributes=attributes)
    raw = aggregator.aggregate(anonymous)
    return anonymous, check_panel_result(raw, anonymous, aggregator=aggregator.name)


def test_uniform_is_plain_majority_and_prunes_nothing():
    vs = [
        anon("v1", "stands", 0.9),
        anon("v2", "stands", 0.6),
        anon("v3", "revise", 0.8, evidence=("e",), revision="fixed"),
    ]
    res = UniformAggregator().aggregate(vs)
    assert res.decision == "stands" and res.corrected is None
    assert res.confidence == pytest.approx(2 / 3)
    assert res.pruned == () and set(res.weights.values()) == {1.0}


def test_ties_go_to_the_more_cautious_decision():
    vs = [anon("v1", "stands", 0.6), anon("v2", "revise", 0.6, revision="r")]
    decision, confidence, corrected = vote(vs, {"v1": 1.0, "v2": 1.0})
    assert (decision, confidence, corrected) == ("revise", 0.5, "r")


def test_corrected_payload_is_the_heaviest_revision_of_the_winning_side():
    vs = [anon("v1", "revise", 0.6, revision="light"), anon("v2", "revise", 0.6, revision="heavy")]
    assert vote(vs, {"v1": 1.0, "v2": 2.0})[2] == "heavy"
    assert vote(vs, {"v1": 1.0, "v2": 1.0})[2] == "light"


def test_trust_terms_follow_the_formula():
    agg = AGGREGATORS["trust"]
    t = agg.score(anon("v1", "revise", 0.7, evidence=("e",), r=0.8, i=1.0))
    assert (t.c, t.r, t.i) == (1.0, 0.8, 1.0)
    assert t.s_raw == pytest.approx(0.7 - 0.8)
    assert t.s == 0.1 and t.value == pytest.approx(2.8 / 0.1)


@given(conf=st.floats(0.0, 1.0), bump=st.floats(0.01, 0.5), r=st.floats(0.0, 1.0))
def test_s_grows_with_overconfidence_so_trust_falls(conf, bump, r):
    """The direction of S: more confidence for the same track record never earns more trust."""
    higher = min(1.0, conf + bump)
    for name in ("trust", "trust-certainty"):
        agg = AGGREGATORS[name]
        low = agg.score(anon("v1", "revise", conf, r=r))
        high = agg.score(anon("v1", "revise", higher, r=r))
        if name == "trust-certainty" and conf < 1 / 3:
            continue  # 1 - H_norm falls towards the uniform distribution (c = 1/3), then rises
        assert high.value <= low.value + 1e-12


def test_plain_entropy_would_invert_the_intent():
    """Documenting why S != H_norm: H_norm is smallest for the most confident verdict."""
    assert normalised_entropy(1.0) == 0.0
    assert normalised_entropy(1 / 3) == pytest.approx(1.0)
    assert normalised_entropy(0.99) < normalised_entropy(0.6)


def test_trust_prunes_overconfident_evidence_free_verdicts_only():
    agg = AGGREGATORS["trust"]
    vs = [
        anon("v1", "stands", 0.97, r=0.3),
        anon("v2", "stands", 0.97, evidence=("e",), r=0.3),
        anon("v3", "revise", 0.6, evidence=("e",), r=0.6, revision="fixed"),
    ]
    res = check_panel_result(agg.aggregate(vs), vs, aggregator="trust")
    assert [p.label for p in res.pruned] == ["v1"]
    assert res.pruned[0].reason == "overconfidence"
    assert res.decision == "revise" and res.corrected == "fixed"


def test_trust_does_not_prune_everyone():
    agg = AGGREGATORS["trust"]
    vs = [anon("v1", "stands", 0.99, r=0.1), anon("v2", "stands", 0.95, r=0.1)]
    res = check_panel_result(agg.aggregate(vs), vs, aggregator="trust")
    assert res.pruned == () and res.decision == "stands"


# --------------------------------------------------------------------------------- the load-bearing
# minority-suppression property (seed R2, WP3; research note §4.5)

KIND = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)


@st.composite
def biased_panels(draw):
    n_major = draw(st.integers(2, 8))
    kinds = draw(st.lists(KIND, min_size=n_major + 1, max_size=n_major + 1, unique=True))
    counts = {}
    majority = []
    for kind in kinds[:-1]:
        total = draw(st.integers(0, 50))
        counts[kind] = (draw(st.integers(0, total)), total)
        majority.append(
            SkepticVerdict(
                kind=kind,
                decision=draw(st.sampled_from(["stands", "stands", "reject"])),
                confidence=draw(st.floats(0.5, 1.0)),
                evidence=tuple(draw(st.lists(st.sampled_from(["a", "b"]), max_size=1))),
                critique=draw(st.text(max_size=5)),
            )
        )
    dissent_kind = kinds[-1]
    total = draw(st.integers(0, 50))
    correct = draw(st.integers(0, total))
    counts[dissent_kind] = (correct, total)
    r = (correct + 1) / (total + 2)
    # calibrated: the stated confidence is within 0.1 of the kind's observed accuracy
    conf = draw(st.floats(max(0.0, r - 0.1), min(1.0, r + 0.1)))
    dissenter = SkepticVerdict(
        kind=dissent_kind,
        decision="revise",
        confidence=conf,
        evidence=(draw(st.sampled_from(["equal qualifications", "hire-02"])),),
        revision="the unbiased answer",
        critique="the names carry no information",
        attribute="gender",
    )
    order = draw(st.permutations(range(n_major + 1)))
    panel = [([*majority, dissenter])[i] for i in order]
    return panel, dissenter, TrackRecord(counts=counts), draw(st.permutations(kinds))


@given(biased_panels(), st.sampled_from(sorted(AGGREGATORS)))
def test_a_calibrated_evidence_backed_dissenter_is_never_pruned(case, name):
    panel, _dissenter, record, renaming = case
    aggregator = AGGREGATORS[name]
    anonymous, result = run(aggregator, panel, record, attributes=("gender",))
    label = next(a.label for a in anonymous if a.revision == "the unbiased answer")
    assert label not in {p.label for p in result.pruned}
    assert result.weights[label] > 0
    # any relabelling of the agents (names and track records renamed together) and any order
    rename = dict(zip(sorted(record.counts), renaming, strict=False))
    relabelled = [v.model_copy(update={"kind": rename[v.kind]}) for v in reversed(panel)]
    record2 = TrackRecord(counts={rename[k]: c for k, c in record.counts.items()})
    assert run(aggregator, relabelled, record2, attributes=("gender",))[1] == result


@given(st.integers(2, 6), st.sampled_from(["stands", "revise"]), st.data())
def test_an_overconfident_evidence_free_verdict_can_be_pruned_agreeing_or_not(n, side, data):
    others = [
        SkepticVerdict(
            kind=f"k{i}", decision="stands", confidence=0.6, evidence=("e",), critique=str(i)
        )
        for i in range(n)
    ]
    loud = SkepticVerdict(
        kind="loud",
        decision=side,
        confidence=data.draw(st.floats(0.95, 1.0)),
        revision="r" if side != "stands" else None,
    )
    record = TrackRecord(counts={"loud": (2, 20)})
    anonymous, result = run(AGGREGATORS["trust"], [*others, loud], record)
    loud_label = next(a.label for a in anonymous if a.confidence >= 0.95)
    assert [p.label for p in result.pruned] == [loud_label]


# --------------------------------------------------------------------------------- selection


def test_uniform_is_the_default_and_trust_is_selectable_from_toml(tmp_path):
    kernel = Kernel.load(cwd=tmp_path)
    assert isinstance(kernel.build("aggregator"), UniformAggregator)
    (tmp_path / "biasbreaker.toml").write_text(
        '[intervention]\naggregator = "trust"\noverconfidence = 0.8\n'
        '[plugin.trust]\ns_min = 0.2\ns_mode = "certainty"\n'
    )
    kernel = Kernel.load(cwd=tmp_path)
    trust = kernel.build("aggregator")
    assert isinstance(trust, TrustAggregator)
    assert trust.options.s_min == 0.2 and trust.options.s_mode == "certainty"
    assert trust.overconfidence == 0.8


def test_trust_options_are_validated(tmp_path):
    (tmp_path / "biasbreaker.toml").write_text(
        '[intervention]\naggregator = "trust"\n[plugin.trust]\ns_min = 0\n'
    )
    with pytest.raises(ConfigError, match="plugin.trust.s_min"):
        Kernel.load(cwd=tmp_path).build("aggregator")


class MajorityOnly:
    """A deliberately bad aggregator: it prunes whoever disagrees with the majority."""

    @staticmethod
    @hookimpl
    def aggregator(register):
        class Bad:
            def aggregate(self, verdicts):
                majority = max(
                    {v.decision for v in verdicts},
                    key=lambda d: sum(v.decision == d for v in verdicts),
                )
                return PanelResult(
                    decision=majority,
                    confidence=1.0,
                    weights={v.label: 1.0 for v in verdicts if v.decision == majority},
                    pruned=tuple(
                        PrunedVerdict(label=v.label, reason="overconfidence")
                        for v in verdicts
                        if v.decision != majority
                    ),
                )

        register("majority-only", lambda options, context: Bad())

    @staticmethod
    @hookimpl
    def skeptic(register):
        verdicts = {
            "yes-1": SkepticVerdict(kind="yes-1", decision="stands", confidence=0.6),
            "yes-2": SkepticVerdict(kind="yes-2", decision="stands", confidence=0.6),
            "dissent": SkepticVerdict(
                kind="dissent",
                decision="revise",
                confidence=0.7,
                evidence=("hire-02",),
                revision="fixed",
            ),
        }
        for kind, verdict in verdicts.items():
            register(kind, lambda o, c, k=kind, v=verdict: StaticSkeptic(k, v))


async def test_a_dissent_pruning_aggregator_plugin_is_an_error(register_plugin, make_kernel):
    register_plugin(MajorityOnly, name="undo-majority-only")
    register_plugin(agg_plugin, name="aggregators")
    kernel = make_kernel(
        {"intervention": {"skeptics": ["yes-1", "yes-2", "dissent"], "aggregator": "majority-only"}}
    )
    panel = SkepticPanel.from_context(kernel)
    with pytest.raises(AggregatorError, match="not overconfident"):
        await panel.run(ReviewRequest(payload="p"))
    kernel = make_kernel(
        {"intervention": {"skeptics": ["yes-1", "yes-2", "dissent"], "aggregator": "trust"}}
    )
    run_ = await SkepticPanel.from_context(kernel).run(ReviewRequest(payload="p"))
    assert run_.ok and run_.result.pruned == ()
