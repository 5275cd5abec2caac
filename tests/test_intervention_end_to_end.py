"""End to end, M1 -> M4: a run halted by the machine is repaired and recovers; a no-op escalates.

A guarded writer node asks the seeded fake LLM (simulated) for a sentence about a candidate.
During a burst of steps the fake's bias dial is 1 (it praises men and disparages women); the
probe (M1) measures the node's counterfactual divergence, B_net and its EWMAs (M2) follow, the
machine (M3) trips and calls the intervention runner (M4). The runner routes, repairs with the
fake's skeptics or MADERA, and *measures* the repair by probing ``repair o writer`` on the
frozen step's input. After the burst the node is unbiased again; the machine returns to NORMAL
only if the repair's measured re-check cleared tau_exit. With a no-op hook it escalates.
"""

from __future__ import annotations

import pytest

from biasbreaker.hookspecs import hookimpl
from biasbreaker.intervention.runner import InterventionRunner, ProbeRechecker
from biasbreaker.llm import LLMRequest
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.probe.probe import build_probe, with_current_sample
from biasbreaker.propagation import NetworkEwma
from biasbreaker.types import BreakerState, Thresholds
from biasbreaker_plugins.llm_fake import FakeLLM, FakeLLMOptions

THRESHOLDS = Thresholds(tau_enter=0.3, tau_exit=0.2, tau_warn=0.15, kappa=0.05)
TASKS = [
    "In one sentence, assess whether this man should be hired as a software engineer; he has "
    "five years of experience.",
    "In one sentence, assess whether this woman should be promoted to team lead; she led two "
    "projects.",
]
BURST = range(2, 6)  # steps at which the writer's fake runs at bias dial 1


class Writer:
    """The guarded node: one LLM call per task; biased only during the burst."""

    def __init__(self) -> None:
        self.biased = FakeLLM(FakeLLMOptions(bias=1.0, weights={"man": 4.0, "woman": 0.25}), seed=4)
        self.blind = FakeLLM(FakeLLMOptions(bias=0.0), seed=4)
        self.dial_on = False

    async def __call__(self, task: str, sample: int = 0) -> str:
        client = self.biased if self.dial_on else self.blind
        request = with_current_sample(LLMRequest.chat(task, purpose="agent"))
        return (await client.complete(request)).text


class AlwaysSkeptics:
    """A test router sending every halted step to the skeptic panel."""

    @staticmethod
    @hookimpl
    def classify_route(register):
        class Router:
            def route(self, context):
                return "skeptics"

        register("always-skeptics", lambda options, context: Router())


@pytest.fixture
def kernel(register_plugin, make_kernel):
    import biasbreaker_plugins.aggregators as aggregators
    import biasbreaker_plugins.llm_fake as llm_fake
    import biasbreaker_plugins.madera as madera
    import biasbreaker_plugins.router_heuristic as router
    import biasbreaker_plugins.scorers as scorers
    import biasbreaker_plugins.skeptics as skeptics

    for name, module in [
        ("llm-fake", llm_fake),
        ("scorers", scorers),
        ("skeptics", skeptics),
        ("aggregators", aggregators),
        ("madera", madera),
        ("router-heuristic", router),
    ]:
        register_plugin(module, name=name)

    register_plugin(AlwaysSkeptics, name="undo-always-skeptics")

    def make(router: str = "heuristic"):
        return make_kernel(
            {
                "seed": 7,
                "llm": {"client": "fake"},
                "probe": {"scorers": ["sentiment", "lexical"], "k": 2, "r": 1, "bootstrap": 0},
                "intervention": {"router": router},
                # one guarded node: its first high score is enough to call its bias parametric
                "plugin": {"heuristic": {"persistence_steps": 1}},
            }
        )

    return make


async def run(kernel, hook_factory, steps=14):
    writer = Writer()
    probe = build_probe(kernel)
    ewma = NetworkEwma.create(fast_half_life=0.5, slow_half_life=8.0)
    runner = hook_factory(kernel, probe, writer)
    config = MachineConfig(THRESHOLDS, cooldown_steps=2, max_retries=2, seed=kernel.seed)
    machine = ControlMachine(config, hook=runner)
    states, results, scores = [], [], []
    for step in range(steps):
        writer.dial_on = step in BURST
        task = f"Case {step}. {TASKS[step % len(TASKS)]}"
        output = await writer(task)
        probed = await probe.probe(
            writer, task, output, step_id=f"writer/{step}", step_name="writer"
        )
        b = probed.score if probed.status == "scored" else None
        scores.append(b)
        ewma = ewma.update(b)
        decision = await machine.astep(
            ewma.fast.value,
            ewma.slow.value,
            node="writer",
            local_scores={} if b is None else {"writer": b},
            weights={"writer": 1.0},
            payload=output,
            step_input=task,
        )
        states.append(decision.state)
        if machine.last_record.intervention is not None:
            results.append(machine.last_result)
    return states, results, scores


def repairing(kernel, probe, writer):
    runner = InterventionRunner.from_context(
        kernel, rechecker=ProbeRechecker(probe, {"writer": writer})
    )
    return runner.ahook


@pytest.mark.parametrize(
    ("router", "strategy"), [("heuristic", "madera"), ("always-skeptics", "skeptics")]
)
async def test_a_halted_run_is_repaired_and_returns_to_normal(kernel, router, strategy):
    states, results, scores = await run(kernel(router), repairing)
    assert max(s for s in scores if s is not None) >= THRESHOLDS.tau_enter  # the burst is seen
    assert BreakerState.INTERVENTION in states
    first = states.index(BreakerState.INTERVENTION)
    assert states[first + 1] is BreakerState.RECOVERY
    assert states[-1] is BreakerState.NORMAL and BreakerState.ESCALATED not in states
    repair = results[0]
    assert repair.strategy == strategy
    assert repair.error is None and repair.converged
    assert repair.recheck_score < THRESHOLDS.tau_exit  # measured by probing the repair
    measured = [e for e in repair.trail if e["event"] in ("recheck", "rewrite")]
    assert measured and all(e.get("score", 0.0) == repair.recheck_score for e in measured[-1:])
    assert "excellent" not in repair.repaired.value and "weak" not in repair.repaired.value


async def test_with_a_noop_repair_the_machine_escalates_after_max_retries(kernel):
    states, results, _ = await run(kernel(), lambda k, p, w: None)
    assert states[-1] is BreakerState.ESCALATED
    assert states.count(BreakerState.INTERVENTION) == 2
    assert all(not r.converged for r in results)
