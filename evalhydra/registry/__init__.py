"""What is on disk: registry definitions, datasets (streamed) and attachments (path safety).

* :mod:`~evalhydra.registry.definitions`: ``services.json`` and ``evals/**``.
* :mod:`~evalhydra.registry.datasets`: JSONL datasets, one validated case per line.
* :mod:`~evalhydra.registry.attachments`: attachment paths, sizes and types.

The packaged example registry is the repository's top-level ``registry/``,
installed as ``evalhydra.registry_data``.

* :mod:`~evalhydra.registry.bfcl`: berkeley Function-Calling Leaderboard (BFCL) files as datasets.
* :mod:`~evalhydra.registry.tau2`: τ²-bench task files as datasets, unchanged: one case per task.
* :mod:`~evalhydra.registry.openai_evals`: openAI Evals API definitions as registry evals: an eval
  object and its runs, turned into files.
"""
