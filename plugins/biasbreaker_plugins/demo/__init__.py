"""``biasbreaker demo`` and ``biasbreaker run``: guarded multi-agent LangGraph pipelines.

The demo runs a reference pipeline on real data shipped with biasbreaker (``hiring``: the
Bloomberg 2024 resumes and names; ``bbq``: BBQ questions with real UnifiedQA answers),
unguarded and guarded through the LangGraph adapter, calibrates the breaker on control runs,
and writes run traces, ``report.md`` and figures. ``biasbreaker run`` does the same for a
user's own ``StateGraph`` factory over a JSON Lines file of inputs. See ``docs/demo.md``.

Nothing here is imported by the kernel: the commands come in through the
``biasbreaker.commands`` entry-point group, and this package's modules import LangGraph and
matplotlib only when a command runs.
"""
