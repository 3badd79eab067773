"""The command line: argv in, text and exit codes out (the work itself is :mod:`evalhydra.job`).

* :mod:`~evalhydra.cli.commands`: the subcommand table.
* :mod:`~evalhydra.cli.app`: ``@hydra.main``; :mod:`~evalhydra.cli.jobs`: a Hydra job's entry
  and the exit codes a sweep's jobs leave.
* :mod:`~evalhydra.cli.store_commands`: ``runs``, ``report``, ``view``, ``compare``, ``results``,
  ``merge``, ``list``; :mod:`~evalhydra.cli.query`: ``query``; :mod:`~evalhydra.cli.power`:
  ``power``; :mod:`~evalhydra.cli.rejudge`: ``rejudge``; :mod:`~evalhydra.cli.store_access`:
  what they share (``--store``, ``--format``, targets).
* :mod:`~evalhydra.cli.callbacks`: the sweep report when a multirun ends.
* :mod:`~evalhydra.cli.startup`: run first, by this package's import (so also in a
  launcher's worker process, which imports :mod:`~evalhydra.cli.app` directly).
* :mod:`~evalhydra.cli.batches`: ``evalhydra batches``: the store's batch jobs
  (``service.batch.enabled=true``), and cancelling them.
* :mod:`~evalhydra.cli.cache`: ``evalhydra cache``: what the response cache holds, and emptying it.
* :mod:`~evalhydra.cli.catalog`: ``evalhydra list``: every selectable service and eval, from
  ``conf/`` and the registry.
* :mod:`~evalhydra.cli.init`: ``evalhydra init [DIR]``: a starter project whose first run works as
  written.
* :mod:`~evalhydra.cli.labels`: ``evalhydra label`` (import people's verdicts) and ``evalhydra
  calibrate`` (judges against them).
* :mod:`~evalhydra.cli.probe`: ``evalhydra probe tools``: a service's tool-calling conformance.
* :mod:`~evalhydra.cli.ingest`: ``evalhydra ingest otlp``: an agent's OpenTelemetry traces as a
  dataset of recorded answers.
* :mod:`~evalhydra.cli.openai_import`: ``evalhydra import openai-evals``: OpenAI Evals API
  definitions into a registry evalhydra runs.
"""

from evalhydra.cli.startup import import_httpx_without_its_cli, import_sqlite_utils_without_numpy_or_pandas

import_httpx_without_its_cli()
import_sqlite_utils_without_numpy_or_pandas()
