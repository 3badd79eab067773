"""Statistics over numbers: pass-rate intervals clustered by case, paired comparisons, Holm's
adjustment, Student's t, power and sample sizes, pass@k. Pure functions of counts and
histograms: nothing here reads the store or a file (``reports`` does, and calls these)."""
