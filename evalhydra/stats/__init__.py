"""Statistics over numbers: pass-rate intervals clustered by case, paired comparisons, Holm's
adjustment, Student's t, power and sample sizes, pass@k. Pure functions of counts and
histograms: nothing here reads the store or a file (``reports`` does, and calls these).

* :mod:`~evalhydra.stats.judge`: how far a judge agrees with human labels, and a pass rate corrected
  for its errors.
* :mod:`~evalhydra.stats.permutation`: the regression gate's test: an exact one-sided sign-flip test
  on per-case differences.
* :mod:`~evalhydra.stats.simulator`: an agent's pass rate corrected for its simulated user's errors,
  from a person's audit.
* :mod:`~evalhydra.stats.simulator_passk`: an agent's pass^k corrected for its simulated user's
  errors, from the same audit.
* :mod:`~evalhydra.stats.rates`: pure statistics for pass/fail eval results (stdlib only, no numpy).
* :mod:`~evalhydra.stats.student_t`: student's t distribution for whole degrees of freedom (stdlib
  only).
"""
