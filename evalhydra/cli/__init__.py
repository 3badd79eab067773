"""The command line: the Hydra app, the job it runs, store subcommands, ``rejudge``, sweep callbacks.

* :mod:`~evalhydra.cli.commands`: the subcommand table.
* :mod:`~evalhydra.cli.app`: ``@hydra.main``; :mod:`~evalhydra.cli.job`: one job end to end.
* :mod:`~evalhydra.cli.store_commands`: ``runs``, ``report``, ``compare``, ``query``, ``results``,
  ``merge``, ``list``; :mod:`~evalhydra.cli.rejudge`: ``rejudge``.
* :mod:`~evalhydra.cli.callbacks`: the sweep report when a multirun ends.
"""
