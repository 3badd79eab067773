"""Execution: the trio runner (nursery, limiter, writer), chat and agent cells, re-judging, progress.

* :mod:`~evalhydra.execute.runner`: :func:`~evalhydra.execute.runner.execute` and
  :func:`~evalhydra.execute.runner.execute_cells`, the one loop every run goes through.
* :mod:`~evalhydra.execute.chat_cell`: one chat cell (ask, score, build the row).
* :mod:`~evalhydra.execute.agent_cell`: one agent-CLI trial as a row.
* :mod:`~evalhydra.execute.rejudge_cell`: the cell source and runner for stored outputs.
* :mod:`~evalhydra.execute.services`: opening the candidate and judge services.
* :mod:`~evalhydra.execute.writer`: the batching store writer task.
* :mod:`~evalhydra.execute.feed`: the producer's outlets: pending cells to the workers, stored
  cells recorded as the run's members; :mod:`~evalhydra.execute.outcome`: what a run did.
* :mod:`~evalhydra.execute.progress`: the progress line.
* :mod:`~evalhydra.execute.gcpace`: how often the cyclic garbage collector runs while a run's cells
  are in flight.
* :mod:`~evalhydra.execute.jobqueue`: cells on their way from the producer to the workers.
* :mod:`~evalhydra.execute.mcp_tools`: MCP servers as a cell's tools, through the official ``mcp``
  SDK (``pip install evalhydra[mcp]``).
* :mod:`~evalhydra.execute.progress_bar`: the terminal progress bar: ``rich`` draws it,
  :class:`evalhydra.execute.progress.Progress` feeds it.
* :mod:`~evalhydra.execute.rows`: every result row a run stores is built here: chat cells, agent
  trials, and re-judged cells.
* :mod:`~evalhydra.execute.toolbox`: a cell's tools: each call the model makes run, its outcome
  turned into the text the model reads.
* :mod:`~evalhydra.execute.toolloop`: a tool loop: the conversation, the calls run, their results
  sent back, until an answer.
* :mod:`~evalhydra.execute.conversation`: a simulated user and the agent take turns until the user
  stops, or a limit does; :mod:`~evalhydra.execute.user_side`: the user's side: its instructions,
  its view, its own tools.
* :mod:`~evalhydra.execute.runrecord`: a new run's id and ``runs`` row;
  :mod:`~evalhydra.execute.deadend`: a dead endpoint told early (``run.fail_fast``);
  :mod:`~evalhydra.execute.masked`: every stored row with the run's secrets masked;
  :mod:`~evalhydra.execute.signals`: Ctrl-C and SIGTERM cancel the run's scope.
"""
