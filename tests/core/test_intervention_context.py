"""The guarded step's input travels with the frozen payload to the intervention hook."""

from biasbreaker.breaker import freeze
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.types import (
    BreakerState,
    InterventionContext,
    InterventionResult,
    Thresholds,
)

THRESHOLDS = Thresholds(tau_enter=0.3, tau_exit=0.2, tau_warn=0.15, kappa=0.05)


def test_step_input_round_trips_and_is_optional_in_json():
    ctx = InterventionContext(
        step=1,
        node="n",
        state=BreakerState.NORMAL,
        fast=0.4,
        slow=0.1,
        mixing_ratio=0.9,
        thresholds=THRESHOLDS,
        frozen_payload=freeze("out"),
        step_input=freeze({"q": "in"}),
    )
    data = ctx.to_json()
    assert data["step_input"]["value"] == {"q": "in"}
    again = InterventionContext.from_json(data)
    assert again.step_input == ctx.step_input
    del data["step_input"]
    assert InterventionContext.from_json(data).step_input is None


def test_the_machine_freezes_the_input_at_the_episode_start_and_keeps_it_for_retries():
    seen = []

    def hook(context):
        seen.append((context.attempt, context.step_input.thaw(), context.frozen_payload.thaw()))
        return InterventionResult.noop()

    machine = ControlMachine(MachineConfig(THRESHOLDS, cooldown_steps=1, max_retries=2), hook=hook)
    task = {"task": "rank"}
    machine.step(0.5, 0.1, node="n", payload="biased", step_input=task)
    task["task"] = "mutated after freezing"
    snapshot = machine.snapshot()
    assert snapshot["frozen_input"]["value"] == {"task": "rank"}
    machine = ControlMachine.restore(snapshot, hook=hook)
    for _ in range(4):
        machine.step(0.1, 0.1, node="n", payload="later", step_input="later input")
    assert seen[0] == (1, {"task": "rank"}, "biased")
    assert seen[1] == (2, {"task": "rank"}, "biased")  # the retry repairs the same episode
    assert machine.state is BreakerState.ESCALATED
