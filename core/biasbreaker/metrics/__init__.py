"""Pure-function fairness metrics shared by the probe, the validation tests and the demo.

* :mod:`~biasbreaker.metrics.stats` — means, percentile bootstrap intervals, AUROC.
* :mod:`~biasbreaker.metrics.bbq` — BBQ accuracy and bias scores (Parrish et al. 2022).
* :mod:`~biasbreaker.metrics.decision` — ranking parsing, per-group top-1 selection rates,
  disparate-impact ratios, label flip rate and normalised rank change.

Pure Python, no numpy: the kernel stays light.
"""
