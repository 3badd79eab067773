"""The subcommand table: the one list of ``evalhydra <command>`` names and their help.

It imports nothing, so ``evalhydra`` can tell a subcommand from Hydra overrides
without loading either side.
"""

from __future__ import annotations

__all__ = ["STORE_COMMANDS", "SUBCOMMANDS", "usage"]

#: Commands over the store (:mod:`evalhydra.cli.store_commands`).
STORE_COMMANDS: dict[str, str] = {
    "runs": "list past runs",
    "report": "regenerate reports from the store",
    "compare": "compare two runs, services or models (paired)",
    "query": "read-only SQL over the store",
    "results": "per-trial listing of a run",
    "merge": "merge shard stores exactly",
    "list": "list a registry's services and evals",
    "view": "write report.html and open it in the browser",
}
#: Every subcommand: the store commands and ``rejudge`` (:mod:`evalhydra.cli.rejudge`).
SUBCOMMANDS: dict[str, str] = {**STORE_COMMANDS, "rejudge": "score a run's stored outputs again"}


def usage() -> str:
    """The top of ``evalhydra --help``: how to run, sweep, and call a subcommand."""
    names = ",".join(SUBCOMMANDS)
    return (
        "usage: evalhydra [HYDRA_OVERRIDES...]        run evals (python -m evalhydra --help for options)\n"
        "       evalhydra -m service=a,b eval=smoke   sweep (Hydra multirun)\n"
        "       evalhydra --version\n"
        f"       evalhydra {{{names}}} [-h] ...\n"
    )
