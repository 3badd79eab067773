"""Execution: the trio runner (nursery, limiter, writer), chat and agent cells, re-judging, progress.

* :mod:`~evalhydra.execute.runner`: :func:`~evalhydra.execute.runner.execute` and
  :func:`~evalhydra.execute.runner.execute_cells`, the one loop every run goes through.
* :mod:`~evalhydra.execute.chat_cell`: one chat cell (ask, score, build the row).
* :mod:`~evalhydra.execute.agent_cell`: one agent-CLI trial as a row.
* :mod:`~evalhydra.execute.rejudge_cell`: the cell source and runner for stored outputs.
* :mod:`~evalhydra.execute.services`: opening the candidate and judge services.
* :mod:`~evalhydra.execute.writer`: the batching store writer task.
* :mod:`~evalhydra.execute.progress`: the progress line.
"""
