"""PNG figures of a guarded run (matplotlib, Agg backend; imported lazily).

* :func:`bnet_figure` — fast and slow B_net over the guarded steps of consecutive runs, with
  ``tau_enter``, ``tau_exit`` and ``tau_warn`` as lines and the breaker's state as coloured
  bands behind them;
* :func:`selection_figure` — the shortlist's selection rate per group, unguarded and guarded
  side by side, with the four-fifths line relative to each phase's best group.

Figures are written without a date in their metadata, so the same run gives the same bytes
(for one matplotlib version).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from biasbreaker.trace import Trace
from biasbreaker_plugins.demo.output import write_atomic
from biasbreaker_plugins.demo.summary import Selection

STATE_COLOURS = {
    "normal": "#ffffff",
    "warning": "#fff3bf",
    "intervention": "#ffc9c9",
    "recovery": "#d0ebff",
    "escalated": "#e5dbff",
}
METADATA = {"Software": None}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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


def bnet_figure(traces: Sequence[Trace], path: Path, *, title: str) -> None:
    """Plot fast/slow B_net, the thresholds and the state bands of ``traces`` (in order).

    When the traces were recorded with node trips on, the guarded node's own score is drawn
    as dots: a node trip happens where a dot reaches ``tau_enter`` while fast B_net is below it.

    Args:
        traces: Runs, plotted one after another (thin grey lines separate them).
        path: The PNG to write.
        title: The figure's title.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 4.2), dpi=110)
    x = 0
    fast: list[float] = []
    slow: list[float] = []
    own: list[tuple[int, float]] = []  # (step, the guarded node's own score)
    for i, trace in enumerate(traces):
        if i:
            ax.axvline(x - 0.5, color="#adb5bd", lw=0.6, zorder=1)
        for r in trace.records:
            ax.axvspan(x - 0.5, x + 0.5, color=STATE_COLOURS[r.state.value], lw=0, zorder=0)
            fast.append(r.fast)
            slow.append(r.slow)
            score = None if r.node is None else r.scores.get(r.node)
            if score is not None:
                own.append((x, score))
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
            color="#e8590c",
            marker="o",
            label="guarded node's own score (node trips)",
            zorder=4,
        )
    if traces:
        th = traces[0].header.thresholds
        for value, name, style in (
            (th.tau_enter, "tau_enter", "-"),
            (th.tau_exit, "tau_exit", "--"),
            (th.tau_warn, "tau_warn", ":"),
        ):
            ax.axhline(value, color="#212529", lw=0.9, ls=style, zorder=2)
            ax.annotate(
                f"{name} {value:.3f}",
                (len(fast) - 0.5, value),
                xytext=(3, 2),
                textcoords="offset points",
                fontsize=7,
                annotation_clip=False,
            )
    for state, colour in STATE_COLOURS.items():
        ax.fill_between([], [], color=colour, label=state, ec="#ced4da")
    ax.set_xlim(-0.5, max(len(fast) - 0.5, 0.5))
    ax.set_ylim(bottom=0.0)
    ax.set_xlabel(f"guarded step ({len(traces)} runs, separated by grey lines)")
    ax.set_ylabel("B_net")
    ax.set_title(title, fontsize=10)
    # below the axes, so it hides neither the thresholds nor the first steps
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=7, ncol=4, frameon=False)
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", metadata=METADATA))
    plt.close(fig)


def selection_figure(
    phases: Sequence[tuple[str, Selection]], labels: dict[str, str], path: Path, *, title: str
) -> None:
    """Grouped bars: each group's selection rate in each phase, with its four-fifths line.

    Args:
        phases: ``(phase label, selection)`` pairs, drawn side by side per group.
        labels: Group code -> label shown on the axis.
        path: The PNG to write.
        title: The figure's title.
    """
    plt = _pyplot()
    groups = list(phases[0][1].groups)
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=110)
    width = 0.8 / len(phases)
    colours = ["#868e96", "#2b8a3e", "#1864ab", "#e67700"]
    for i, (name, sel) in enumerate(phases):
        xs = [g + (i - (len(phases) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(
            xs,
            [sel.rates[g] for g in groups],
            width,
            color=colours[i % len(colours)],
            label=f"{name} (n = {sel.decided}, lowest impact ratio {sel.min_impact:.2f})",
        )
        best = max(sel.rates.values(), default=0.0)
        ax.axhline(0.8 * best, color=colours[i % len(colours)], lw=0.8, ls="--")
    ax.set_xticks(range(len(groups)), [labels.get(g, g) for g in groups], fontsize=8)
    ax.set_ylabel("selection rate (share of postings shortlisted)")
    ax.set_title(title + " — dashed: 4/5 of each phase's best rate", fontsize=10)
    ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", metadata=METADATA))
    plt.close(fig)


__all__ = ["bnet_figure", "pick_runs", "selection_figure"]
