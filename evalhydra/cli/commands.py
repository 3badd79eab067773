"""The subcommand table: the one list of ``evalhydra <command>`` names and their help.

It imports only the standard library, so ``evalhydra`` can tell a subcommand
from Hydra overrides without loading either side.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from evalhydra.job.exit_codes import ExitCode

__all__ = ["RUN_COMMANDS", "STORELESS_COMMANDS", "STORE_COMMANDS", "SUBCOMMANDS", "CommandParser", "usage"]

#: Commands over the store (:mod:`evalhydra.cli.store_commands`).
STORE_COMMANDS: dict[str, str] = {
    "runs": "list past runs",
    "report": "regenerate reports from the store",
    "compare": "compare two runs, services or models (paired)",
    "query": "read-only SQL over the store",
    "results": "per-trial listing of a run",
    "merge": "merge shard stores exactly",
    "list": "list a registry's services and evals",
    "view": "serve a live viewer of the store's runs (--static: write report.html)",
    "power": "cases × trials needed to detect a drop",
    "cache": "the response cache: stats, prune, clear",
    "batches": "the store's batch jobs: list, cancel",
    "import": "import OpenAI Evals API definitions into a registry",
    "label": "import people's PASS/FAIL labels of stored outputs",
    "calibrate": "judges against people's labels; pass rates corrected for judge errors",
    "ingest": "turn an agent's OpenTelemetry traces into recorded answers (service=recorded scores them)",
}
#: Store commands that never open a store: their --help offers no --store.
STORELESS_COMMANDS = frozenset({"import", "cache", "list", "ingest"})
#: Commands that take a run's Hydra overrides: ``rejudge`` (:mod:`evalhydra.cli.rejudge`), ``check``
#: and ``probe`` (:mod:`evalhydra.cli.probe`).
RUN_COMMANDS: dict[str, str] = {
    "rejudge": "score a run's stored outputs again",
    "check": "send one request to each endpoint of a run: reachable, key, model, latency",
    "probe": "probe a service's tool calling: conformance checks with the raw evidence",
}
#: Every subcommand: the store commands, the run commands and ``init`` (:mod:`evalhydra.cli.init`).
SUBCOMMANDS: dict[str, str] = {**STORE_COMMANDS, **RUN_COMMANDS,
                               "init": "write a starter project: an eval, its dataset, a service"}


def usage() -> str:
    """The top of ``evalhydra --help``: how to run, sweep, and call a subcommand."""
    names = ",".join(SUBCOMMANDS)
    return (
        "usage: evalhydra [HYDRA_OVERRIDES...]        run evals (python -m evalhydra --help for options)\n"
        "       evalhydra -m service=a,b eval=smoke   sweep (Hydra multirun)\n"
        "       evalhydra --version\n"
        f"       evalhydra {{{names}}} [-h] ...\n"
    )


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one ``error:`` line, then the usage and the fix.

    argparse prints the usage first and ``<prog>: error: …`` after it; a CI log
    (and evalhydra's exit-code contract) wants the ``error:`` line first and alone.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``error: <prog>: <message>``, the usage, and where the help is; exit 2."""
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        print(self.format_usage().rstrip(), file=sys.stderr)
        print(f"See: {self.prog} --help", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE)
