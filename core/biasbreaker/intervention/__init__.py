"""Intervention (M4): repair a halted step instead of only stopping it.

* :mod:`~biasbreaker.intervention.router`: routing a tripped step to a strategy
  (``checked_route``).
* :mod:`~biasbreaker.intervention.types`: verdicts, panel results, trust scores, track records,
  MADERA records.
* :mod:`~biasbreaker.intervention.review`: fencing untrusted text and asking an LLM for a
  schema-validated reply.
* :mod:`~biasbreaker.intervention.panel`: the concurrent skeptic panel (>= 2 distinct kinds).
* :mod:`~biasbreaker.intervention.invariants`: anonymisation and the checks on every
  aggregator's result (prune only for overconfidence, never for dissent).
* :mod:`~biasbreaker.intervention.madera`: the bounded diagnose -> retrieve -> rewrite loop.
* :mod:`~biasbreaker.intervention.corpus`: counter-evidence corpora (JSON Lines).
* :mod:`~biasbreaker.intervention.blend`: applying the mixing ratio to a repair.

The implementations behind them (skeptics, aggregators, MADERA stages) are plugins.
"""
