"""PNG figures of a guarded run (matplotlib, Agg backend; imported lazily).

* :func:`bnet_figure` — fast and slow B_net over the guarded steps of consecutive runs, with
  ``tau_enter``, ``tau_exit`` and ``tau_warn`` as lines named in the legend, each trip marked
  by its trigger (the network's fast B_net, or the guarded node's own score) and the breaker's
  states that occur as coloured bands behind them;
* :func:`selection_figure` — the shortlist's selection rate per group, one bar per phase side
  by side, with the four-fifths line relative to each phase's best group, every line named in
  a legend below the bars;
* :func:`lean_figure` — each phase's preference lean (:class:`~biasbreaker_plugins.demo.
  summary.Lean`) with its 95% interval, against the no-lean line at 1.

Each function returns what it drew (:class:`Drawn`), so a test can check a figure's content
without reading pixels. Figures are written without a date in their metadata, so the same run
gives the same bytes (for one matplotlib version).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasbreaker.trace import Trace
from biasbreaker_plugins.demo.output import write_atomic
from biasbreaker_plugins.demo.summary import Lean, Selection, trip_trigger

STATE_COLOURS = {
    "normal": "#ffffff",
    "warning": "#fff3bf",
    "intervention": "#ffc9c9",
    "recovery": "#d0ebff",
    "escalated": "#e5dbff",
}
METADATA = {"Software": None}
TRIP_MARKERS = {"network": ("^", "#862e9c"), "node": ("D", "#e8590c")}
"""Trigger -> (matplotlib marker, colour) of the trip marks of :func:`bnet_figure`."""
TRIP_LABELS = {
    "network": "network trip: fast B_net >= tau_enter",
    "node": "node trip: own score >= tau_enter, fast below",
}
"""Trigger -> the legend's label of its trip marks."""


@dataclass(frozen=True)
class Drawn:
    """What a figure function drew, for tests and for the report's captions.

    Args:
        path: The PNG written.
        legend: The legend's labels, in order.
        trips: Trigger (``"network"`` or ``"node"``) -> trips marked (:func:`bnet_figure`
            only; empty for the other figures).
    """

    path: Path
    legend: tuple[str, ...]
    trips: dict[str, int]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _written(plt: Any, fig: Any, ax: Any, path: Path, handles: list[Any], *, below: float) -> Drawn:
    """Put ``handles``' legend ``below`` (axes fraction) the axes, write ``path``, close."""
    legend = ax.legend(
        handles=handles,
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -below),
        ncol=2,
        frameon=False,
    )
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", metadata=METADATA))
    plt.close(fig)
    return Drawn(path, tuple(t.get_text() for t in legend.get_texts()), {})


def pick_runs(traces: Iterable[Trace], *, tripped: int = 3, limit: int = 20) -> list[Trace]:
    """Consecutive runs to plot, from the first.

    Stops once ``tripped`` runs that tripped are included (and at least 8 runs, when there are
    that many), or at ``limit`` runs.
    """
    out: list[Trace] = []
    seen = 0
    for trace in traces:
        if len(out) >= limit:
            break
        out.append(trace)
        if any(r.state.value != "normal" and r.state.value != "warning" for r in trace.records):
            seen += 1
            if seen >= tripped and len(out) >= min(limit, 8):
                break
    return out


def bnet_figure(
    traces: Sequence[Trace], path: Path, *, title: str, total: int | None = None
) -> Drawn:
    """Plot fast/slow B_net, the thresholds, the trips and the state bands of ``traces``.

    A trip (a record whose transition is ``trip``; a ``retry`` after a failed repair is none)
    is marked at the statistic that fired it: a triangle at fast B_net for a network trip, a
    diamond at the node's own score for a node trip (:func:`trip_trigger`). When the traces
    were recorded with node trips on, the guarded node's own score is drawn as dots. Only the
    breaker states that occur get a band in the legend.

    Args:
        traces: Runs, plotted one after another (thin grey lines separate them); the first
            ``len(traces)`` runs of their phase, in order (:func:`pick_runs`).
        path: The PNG to write.
        title: The figure's title.
        total: How many runs the phase has, said in the axis label ("runs 1-11 of 24");
            ``None`` says only how many are shown.

    Returns:
        What was drawn: the legend's labels and the trips per trigger.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 4.4), dpi=110)
    tau_enter = traces[0].header.thresholds.tau_enter if traces else 1.0
    x = 0
    fast: list[float] = []
    slow: list[float] = []
    own: list[tuple[int, float]] = []  # (step, the guarded node's own score)
    marks: dict[str, list[tuple[int, float]]] = {"network": [], "node": []}
    states: set[str] = set()
    for i, trace in enumerate(traces):
        if i:
            ax.axvline(x - 0.5, color="#adb5bd", lw=0.6, zorder=1)
        for r in trace.records:
            states.add(r.state.value)
            ax.axvspan(x - 0.5, x + 0.5, color=STATE_COLOURS[r.state.value], lw=0, zorder=0)
            fast.append(r.fast)
            slow.append(r.slow)
            score = None if r.node is None else r.scores.get(r.node)
            if score is not None:
                own.append((x, score))
            if r.transition == "trip":
                trigger = trip_trigger(r.fast, tau_enter)
                at = r.fast if trigger == "network" or score is None else score
                marks[trigger].append((x, at))
            x += 1
    steps = list(range(len(fast)))
    ax.plot(steps, fast, color="#c92a2a", lw=1.4, label="fast B_net", zorder=3)
    ax.plot(steps, slow, color="#1864ab", lw=1.4, label="slow B_net", zorder=3)
    if traces and traces[0].header.node_trip and own:
        # with node trips the statistic that trips is max(fast, own score)
        ax.scatter(
            [s for s, _ in own],
            [v for _, v in own],
            s=9,
            color="#fd7e14",
            marker="o",
            label="guarded node's own score",
            zorder=4,
        )
    for trigger, points in marks.items():
        if points:
            marker, colour = TRIP_MARKERS[trigger]
            ax.scatter(
                [s for s, _ in points],
                [v for _, v in points],
                s=42,
                color=colour,
                marker=marker,
                ec="#212529",
                lw=0.6,
                label=f"{TRIP_LABELS[trigger]} ({len(points)} in the runs shown)",
                zorder=5,
            )
    if traces:
        th = traces[0].header.thresholds
        for value, name, style in (
            (th.tau_enter, "tau_enter", "-"),
            (th.tau_exit, "tau_exit", "--"),
            (th.tau_warn, "tau_warn", ":"),
        ):
            ax.axhline(
                value, color="#212529", lw=0.9, ls=style, zorder=2, label=f"{name} {value:.4g}"
            )
    for state, colour in STATE_COLOURS.items():
        if state in states:
            ax.fill_between([], [], color=colour, label=f"{state} (band)", ec="#ced4da")
    ax.set_xlim(-0.5, max(len(fast) - 0.5, 0.5))
    ax.set_ylim(bottom=0.0)
    shown = f"runs 1-{len(traces)}" if len(traces) > 1 else f"run {len(traces)}"
    of = f" of {total}" if total is not None else ""
    ax.set_xlabel(f"guarded step ({shown}{of} of the phase, in order; grey lines separate runs)")
    ax.set_ylabel("B_net")
    ax.set_title(title, fontsize=10)
    # below the axes, so it hides neither the thresholds nor the first steps
    legend = ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=7, ncol=5, frameon=False
    )
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", metadata=METADATA))
    plt.close(fig)
    return Drawn(
        path,
        tuple(t.get_text() for t in legend.get_texts()),
        {trigger: len(points) for trigger, points in marks.items()},
    )


def selection_figure(
    phases: Sequence[tuple[str, Selection]], labels: dict[str, str], path: Path, *, title: str
) -> Drawn:
    """Grouped bars: each group's selection rate in each phase, with its four-fifths line.

    Args:
        phases: ``(phase label, selection)`` pairs, drawn side by side per group.
        labels: Group code -> label shown on the axis.
        path: The PNG to write.
        title: The figure's title.

    Returns:
        What was drawn: the legend's labels (each phase's bars, then each phase's
        four-fifths line; phases whose lines coincide at the shown precision share one).
    """
    plt = _pyplot()
    groups = list(phases[0][1].groups)
    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=110)
    width = 0.8 / len(phases)
    colours = ["#868e96", "#2b8a3e", "#1864ab", "#e67700"]
    styles = ["--", "-.", ":", (0, (5, 1))]
    handles = []
    for i, (name, sel) in enumerate(phases):
        xs = [g + (i - (len(phases) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(
            xs,
            [sel.rates[g] for g in groups],
            width,
            color=colours[i % len(colours)],
            label=f"{name}: rate (n = {sel.decided}, lowest impact ratio {sel.min_impact:.2f})",
        )
        handles.append(bars)
    # phases whose four-fifths lines coincide share one line (drawn over each other, the
    # later style hid the earlier): one line, its label naming them all
    lines: dict[str, list[int]] = {}
    for i, (_, sel) in enumerate(phases):
        lines.setdefault(f"{0.8 * max(sel.rates.values(), default=0.0):.3f}", []).append(i)
    for level, members in lines.items():
        first = members[0]
        names = ", ".join(phases[i][0] for i in members)
        whose = "its" if len(members) == 1 else "each one's"
        line = ax.axhline(
            float(level),
            color=colours[first % len(colours)] if len(members) == 1 else "#212529",
            lw=1.0,
            ls=styles[first % len(styles)],
            label=f"{names}: 4/5 of {whose} best rate ({level})",
        )
        handles.append(line)
    ax.set_xticks(range(len(groups)), [labels.get(g, g) for g in groups], fontsize=8)
    ax.set_ylabel("selection rate (share of postings shortlisted)")
    ax.set_title(title, fontsize=10)
    return _written(plt, fig, ax, path, handles, below=0.1)  # below the axes: covers no bar


def lean_figure(phases: Sequence[tuple[str, Lean]], path: Path, *, title: str) -> Drawn:
    """Each phase's preference lean with its 95% interval, against the no-lean line at 1.

    Args:
        phases: ``(phase label, lean)`` pairs, drawn top to bottom; a phase with no posting
            (``Lean.postings == 0``) is listed without a point.
        path: The PNG to write.
        title: The figure's title.

    Returns:
        What was drawn: the legend's labels.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.55 * len(phases)), dpi=110)
    ys = list(range(len(phases)))[::-1]
    drawn = [(y, ln) for y, (_, ln) in zip(ys, phases, strict=True) if ln.postings]
    points = ax.errorbar(
        [ln.mean for _, ln in drawn],
        [y for y, _ in drawn],
        xerr=[ln.half_width for _, ln in drawn],
        fmt="o",
        color="#1864ab",
        ecolor="#1864ab",
        capsize=4,
        label="mean weight of the shortlisted groups, 95% interval",
    )
    no_lean = ax.axvline(
        1.0, color="#212529", lw=0.9, ls="--", label="1 = no lean (group-blind expectation)"
    )
    ax.set_yticks(ys, [f"{name} (n = {ln.postings})" for name, ln in phases], fontsize=8)
    ax.set_ylim(-0.6, len(phases) - 0.4)
    ax.set_xlabel("lean: mean over postings of (groups x measured top-1 rate) of the shortlisted")
    ax.set_title(title, fontsize=10)
    return _written(plt, fig, ax, path, [points, no_lean], below=0.35)


__all__ = ["Drawn", "bnet_figure", "lean_figure", "pick_runs", "selection_figure"]
