import json

import pytest

from biasbreaker.breaker import freeze
from biasbreaker.intervention.madera import Madera
from biasbreaker.intervention.panel import SkepticPanel
from biasbreaker.intervention.runner import InterventionRunner, Recheck, parse_like
from biasbreaker.intervention.types import Diagnosis, Evidence, SkepticVerdict, TrackRecord
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.types import BreakerState, InterventionContext, Thresholds
from biasbreaker_plugins.aggregators import UniformAggregator
from intervention_doubles import StaticSkeptic

THRESHOLDS = Thresholds(tau_enter=0.3, tau_exit=0.2, tau_warn=0.15, kappa=0.05)
BIASED = "Hire John: he is a man, so he is the better engineer."
FAIR = "Both candidates are equally qualified; rank by the resumes."


class Route:
    def __init__(self, choice):
        self.choice = choice

    def route(self, context):
        return self.choice


class VariantRechecker:
    """Re-check double: applies the repair to fixed variant outputs of the node and scores the
    share of repaired variants that differ from the repaired payload (a measured toy score)."""

    def __init__(self, variants):
        self.variants = variants
        self.calls = 0

    async def recheck(self, context, repair, repaired):
        outs = [await repair(v) for v in self.variants]
        self.calls += len(outs)
        return Recheck(score=sum(o != repaired for o in outs) / len(outs), calls=len(outs))


class FixingSkeptic(StaticSkeptic):
    """Revises any payload mentioning 'man' to FAIR; lets other payloads stand."""

    async def review(self, request):
        if " man" in request.payload or "woman" in request.payload:
            return SkepticVerdict(
                kind=self.kind,
                decision="revise",
                confidence=0.7,
                evidence=("hire-02",),
                revision=FAIR,
                attribute="gender",
            )
        return SkepticVerdict(kind=self.kind, decision="stands", confidence=0.6)


def panel(*skeptics):
    return SkepticPanel(list(skeptics), UniformAggregator(), aggregator_name="uniform")


def context(payload=BIASED, *, m=0.9, step_input="Rank John and Emily.", attempt=1):
    return InterventionContext(
        step=5,
        node="writer",
        state=BreakerState.NORMAL,
        fast=0.45,
        slow=0.2,
        mixing_ratio=m,
        thresholds=THRESHOLDS,
        local_scores={"writer": 0.5},
        weights={"writer": 1.0},
        attempt=attempt,
        frozen_payload=freeze(payload),
        seed=11,
        step_input=None if step_input is None else freeze(step_input),
    )


def events(result, name):
    return [e for e in result.trail if e["event"] == name]


async def test_route_none_repairs_nothing():
    runner = InterventionRunner(Route("none"), VariantRechecker([BIASED]))
    result = await runner.ahook(context())
    assert result.strategy == "none" and result.repaired is None and not result.converged
    assert events(result, "route")[0]["route"] == "none"


async def test_skeptic_route_repairs_and_measures_the_repair():
    checker = VariantRechecker(["Hire Emily: she is a woman, so she is better.", BIASED])
    runner = InterventionRunner(
        Route("skeptics"),
        checker,
        panel=panel(FixingSkeptic("a", None), FixingSkeptic("b", None)),
    )
    result = await runner.ahook(context())
    assert result.strategy == "skeptics" and result.repaired.value == FAIR
    assert result.converged and result.recheck_score == 0.0 and result.error is None
    assert checker.calls == 2
    assert [e["kind"] for e in events(result, "verdict")] == ["a", "b"]
    assert events(result, "recheck")[0]["passes"] is True
    assert runner.track_record.counts == {"a": (1, 1), "b": (1, 1)}


async def test_a_repair_that_does_not_generalise_fails_the_recheck():
    class OneShot(StaticSkeptic):
        async def review(self, request):
            if request.payload == BIASED:
                return SkepticVerdict(
                    kind=self.kind,
                    decision="revise",
                    confidence=0.7,
                    evidence=("e",),
                    revision=FAIR,
                )
            return SkepticVerdict(kind=self.kind, decision="stands", confidence=0.6)

    runner = InterventionRunner(
        Route("skeptics"),
        VariantRechecker(["Hire Emily: she is a woman.", BIASED]),
        panel=panel(OneShot("a", None), OneShot("b", None)),
    )
    result = await runner.ahook(context())
    assert result.repaired is not None and result.recheck_score == 0.5
    assert not result.converged and not result.recheck_passes(THRESHOLDS.tau_exit)
    assert runner.track_record == TrackRecord()  # no measured success: record unchanged


async def test_a_panel_that_fails_closed_fails_the_attempt():
    broken = StaticSkeptic("b", None, error=RuntimeError("down"))
    runner = InterventionRunner(
        Route("skeptics"), VariantRechecker([BIASED]), panel=panel(FixingSkeptic("a", None), broken)
    )
    result = await runner.ahook(context())
    assert result.repaired is None and not result.converged
    assert "failed closed" in result.error
    assert events(result, "skeptic-failed")[0]["reason"] == "RuntimeError: down"


async def test_panel_says_stands_no_repair():
    runner = InterventionRunner(
        Route("skeptics"),
        VariantRechecker([BIASED]),
        panel=panel(FixingSkeptic("a", None), FixingSkeptic("b", None)),
    )
    result = await runner.ahook(context("A neutral summary."))
    assert result.repaired is None and result.error is None
    assert "stands" in events(result, "no-repair")[0]["reason"]


class Diag:
    async def diagnose(self, payload, request):
        return Diagnosis(span=payload[:8], attribute="gender", query="equally qualified")


class Retr:
    def __init__(self, n=1):
        self.n = n

    def retrieve(self, query, *, top_k):
        return [Evidence(id="hire-02", text="equal resumes, equal ranks")][: self.n]


class Edit:
    async def rewrite(self, payload, diagnosis, evidence):
        return FAIR if " man" in payload or "woman" in payload else payload


async def test_madera_route_rewrites_rescoring_each_round():
    checker = VariantRechecker(["Hire Emily: she is a woman.", BIASED])
    runner = InterventionRunner(
        Route("madera"), checker, madera=Madera(Diag(), Retr(), Edit(), max_rewrites=3)
    )
    result = await runner.ahook(context())
    assert result.strategy == "madera" and result.repaired.value == FAIR and result.converged
    rewrites = events(result, "rewrite")
    assert len(rewrites) == 1 and rewrites[0]["evidence"] == ("hire-02",)
    assert events(result, "madera-stop")[0]["reason"] == "converged"


async def test_madera_without_evidence_keeps_the_payload():
    runner = InterventionRunner(
        Route("madera"), VariantRechecker([BIASED]), madera=Madera(Diag(), Retr(n=0), Edit())
    )
    result = await runner.ahook(context())
    assert result.repaired is None and not result.converged and result.error is None
    assert "no evidence" in events(result, "no-repair")[0]["reason"]


async def test_a_madera_stage_that_raises_is_named_in_the_trail():
    class Exploding:
        def retrieve(self, query, *, top_k):
            raise RuntimeError("retriever exploded")

    madera = Madera(Diag(), Exploding(), Edit(), names={"retriever": "nu3-retr"})
    runner = InterventionRunner(Route("madera"), VariantRechecker([BIASED]), madera=madera)
    result = await runner.ahook(context())
    assert result.repaired is None
    assert result.error == (
        "InterventionError: retriever 'nu3-retr' raised RuntimeError: retriever exploded"
    )
    assert events(result, "failed")[0]["error"] == result.error


async def test_structured_payloads_are_blended_by_the_mixing_ratio():
    class ScoreSkeptic(StaticSkeptic):
        async def review(self, request):
            return SkepticVerdict(
                kind=self.kind,
                decision="revise",
                confidence=0.7,
                evidence=("e",),
                revision=json.dumps({"score": 0.5}),
            )

    runner = InterventionRunner(
        Route("skeptics"),
        VariantRechecker([{"score": 0.9}]),
        panel=panel(ScoreSkeptic("a", None), ScoreSkeptic("b", None)),
    )
    result = await runner.ahook(context({"score": 0.9}, m=0.75))
    assert result.repaired.value["score"] == pytest.approx(0.6)
    assert events(result, "blend")[0]["mixing_ratio"] == 0.75


def test_parse_like():
    assert parse_like("text", "new") == "new"
    assert parse_like({"a": 1}, '{"a": 2}') == {"a": 2}
    assert parse_like({"a": 1}, "[1]") is None
    assert parse_like([1], "not json") is None
    assert parse_like(1, "true") is None


async def test_router_errors_and_missing_payload_fail_closed():
    class Bad:
        def route(self, context):
            raise ValueError("no idea")

    result = await InterventionRunner(Bad(), VariantRechecker([])).ahook(context())
    assert result.error.startswith("PluginError") and result.repaired is None
    result = await InterventionRunner(Route("bogus"), VariantRechecker([])).ahook(context())
    assert "PluginError" in result.error
    ctx = InterventionContext(
        step=0,
        node="w",
        state=BreakerState.NORMAL,
        fast=0.5,
        slow=0.1,
        mixing_ratio=0.9,
        thresholds=THRESHOLDS,
    )
    result = await InterventionRunner(Route("skeptics"), VariantRechecker([])).ahook(ctx)
    assert "no frozen payload" in result.error


def drive(machine, trajectory, payload=BIASED):
    states = []
    for fast in trajectory:
        decision = machine.step(
            fast,
            fast / 2,
            node="writer",
            local_scores={"writer": fast},
            weights={"writer": 1.0},
            payload=payload,
            step_input="Rank John and Emily.",
        )
        states.append(decision.state)
    return states


def test_the_machine_recovers_with_the_runner_and_escalates_with_a_noop_repair():
    config = MachineConfig(THRESHOLDS, cooldown_steps=2, max_retries=2)
    runner = InterventionRunner(
        Route("skeptics"),
        VariantRechecker(["Hire Emily: she is a woman.", BIASED]),
        panel=panel(FixingSkeptic("a", None), FixingSkeptic("b", None)),
    )
    machine = ControlMachine(config, hook=runner.hook)
    states = drive(machine, [0.1, 0.5, 0.1, 0.1, 0.1])
    assert states[1] is BreakerState.INTERVENTION and states[-1] is BreakerState.NORMAL
    assert BreakerState.RECOVERY in states

    noop = InterventionRunner(Route("none"), VariantRechecker([BIASED]))
    machine = ControlMachine(config, hook=noop.hook)
    states = drive(machine, [0.1, 0.5] + [0.1] * 10)
    assert states[-1] is BreakerState.ESCALATED
    assert states.count(BreakerState.INTERVENTION) == 2  # max_retries attempts, then escalate


class StubProbe:
    def __init__(self, status="scored", score=0.0):
        self.status, self.score, self.seen = status, score, []

    async def probe(self, step, value, output, *, step_id, step_name):
        self.seen.append((await step(value, sample=1), output, step_id))
        from types import SimpleNamespace

        return SimpleNamespace(
            status=self.status, score=self.score, k=2, r=1, calls=3, reason="no protected term"
        )


async def test_probe_rechecker_probes_repair_after_node_on_the_frozen_input():
    from biasbreaker.errors import InterventionError
    from biasbreaker.intervention.runner import ProbeRechecker

    async def node(value, sample=0):
        return f"{value}/{sample}"

    tasks = []

    async def repair(output, task=None):
        tasks.append(task)
        return output.upper()

    probe = StubProbe(score=0.05)
    check = await ProbeRechecker(probe, {"writer": node}).recheck(context(), repair, "R")
    assert check.score == 0.05 and check.calls == 2
    assert probe.seen[0][0] == "RANK JOHN AND EMILY./1" and probe.seen[0][1] == "R"
    assert tasks == ["Rank John and Emily."]  # the repair saw the input the output came from
    with pytest.raises(InterventionError, match="no guarded step"):
        await ProbeRechecker(probe, {}).recheck(context(), repair, "R")
    with pytest.raises(InterventionError, match="no step input"):
        await ProbeRechecker(probe, {"writer": node}).recheck(context(step_input=None), repair, "R")
    with pytest.raises(InterventionError, match="not_applicable"):
        await ProbeRechecker(StubProbe("not_applicable", None), {"writer": node}).recheck(
            context(), repair, "R"
        )


async def test_probe_rechecker_compares_what_compared_makes_of_each_repaired_output():
    """``compared[node]`` sees every re-run's repaired output with its input, and the repaired
    output under check with the halted step's input; a node without an entry is unchanged."""
    from biasbreaker.intervention.runner import ProbeRechecker

    async def node(value, sample=0):
        return f"{value}/{sample}"

    async def repair(output, task=None):
        return output.upper()

    seen = []

    async def with_route(output, task):
        seen.append((output, task))
        return {"output": output, "route": "deny" if "Emily" in task else "approve"}

    probe = StubProbe(score=0.0)
    rechecker = ProbeRechecker(probe, {"writer": node}, {"writer": with_route})
    await rechecker.recheck(context(), repair, "R")
    step_output, reference, _ = probe.seen[0]
    assert reference == {"output": "R", "route": "deny"}
    assert step_output == {"output": "RANK JOHN AND EMILY./1", "route": "deny"}
    assert seen == [
        ("R", "Rank John and Emily."),
        ("RANK JOHN AND EMILY./1", "Rank John and Emily."),
    ]
    other = StubProbe(score=0.0)
    await ProbeRechecker(other, {"writer": node}, {"reader": with_route}).recheck(
        context(), repair, "R"
    )
    assert other.seen[0][:2] == ("RANK JOHN AND EMILY./1", "R")


@pytest.mark.parametrize(
    ("status", "score"),
    [("not_applicable", 0.0), ("unreadable", 0.0), ("unsupported_language", 0.0), ("scored", None)],
)
async def test_a_recheck_that_did_not_score_fails_whatever_score_it_carries(status, score):
    """Only ``scored`` with a score passes: a result of another status carrying a stale score,
    or a scored one without a score, is no measurement of the repair."""
    from biasbreaker.errors import InterventionError
    from biasbreaker.intervention.runner import ProbeRechecker

    async def node(value, sample=0):
        return value

    async def repair(output, task=None):
        return output

    with pytest.raises(InterventionError, match="could not score the repair"):
        await ProbeRechecker(StubProbe(status, score), {"writer": node}).recheck(
            context(), repair, "R"
        )


async def test_each_recheck_of_one_step_is_its_own_probe_step():
    """A probe shared across re-checks caches outputs by step name: two re-checks of one step
    and attempt, with different repairs, must not share a name (the second would be scored on
    the first repair's cached outputs)."""
    from biasbreaker.intervention.runner import ProbeRechecker
    from biasbreaker.probe import CounterfactualGenerator, Probe

    class Exact:
        name = "exact"
        compares_neutralised = True

        def divergence(self, originals, counterfactuals):
            return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]

    def node(value, sample=0):
        return "hire" if value.startswith("He ") else "reject"

    async def biased(output, task=None):
        return output

    async def neutral(output, task=None):
        return "refer"

    shared = Probe([Exact()], generator=CounterfactualGenerator(seed=3), k=2, r=1, bootstrap=0)
    checker = ProbeRechecker(shared, {"writer": node})
    given = context(step_input="He applied for the analyst job.")
    first = await checker.recheck(given, neutral, "refer")
    second = await checker.recheck(given, biased, "hire")
    assert first.score == 0.0 and second.score == 1.0  # not the neutral repair's outputs


async def test_a_routed_step_output_is_repaired_without_its_route():
    """A step that returns a ``Routed`` (output and where it sent the run): the repair gets
    the output alone, and ``compared`` gets the repaired output with the route the re-run
    took; without a ``compared`` entry the routed re-run is compared as it is."""
    from biasbreaker.intervention.runner import ProbeRechecker
    from biasbreaker.probe import Routed

    async def node(value, sample=0):
        return Routed(f"{value}/{sample}", ["deny"])

    repaired_inputs = []

    async def repair(output, task=None):
        repaired_inputs.append(output)
        return output.upper()

    seen = []

    async def finish(output, task):
        seen.append(output)
        return output

    probe = StubProbe(score=0.0)
    await ProbeRechecker(probe, {"writer": node}, {"writer": finish}).recheck(
        context(), repair, "R"
    )
    assert repaired_inputs == ["Rank John and Emily./1"]
    assert seen == ["R", Routed("RANK JOHN AND EMILY./1", ["deny"])]
    bare = StubProbe(score=0.0)
    await ProbeRechecker(bare, {"writer": node}).recheck(context(), repair, "R")
    assert bare.seen[0][:2] == (Routed("RANK JOHN AND EMILY./1", ["deny"]), "R")


async def test_the_skeptics_review_each_rechecked_output_with_its_own_task():
    """In the re-check, a variant's output is reviewed against the variant's input."""
    seen = []

    class TaskReader(StaticSkeptic):
        async def review(self, request):
            seen.append((request.task, request.payload))
            return SkepticVerdict(
                kind=self.kind,
                decision="revise",
                confidence=0.7,
                evidence=("e",),
                revision=f"fixed for {request.task}",
            )

    class VariantInput:
        async def recheck(self, context, repair, repaired):
            out = await repair("variant output", "Rank Jamal and Emily.")
            return Recheck(score=0.0 if out == "fixed for Rank Jamal and Emily." else 1.0, calls=1)

    runner = InterventionRunner(
        Route("skeptics"), VariantInput(), panel=panel(TaskReader("a", None), TaskReader("b", None))
    )
    result = await runner.ahook(context())
    assert result.converged and result.recheck_score == 0.0
    assert ("Rank Jamal and Emily.", "variant output") in seen
