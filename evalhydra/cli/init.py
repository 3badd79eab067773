"""``evalhydra init [DIR]``: a starter project whose first run works as written.

It writes an eval in evalhydra's own format with its dataset beside it, a service for any
OpenAI-compatible endpoint read from ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``OPENAI_MODEL``
(a ``.env`` file in the working directory, then the project's, is read, never over the
environment), and prints the commands to run it on the built-in mock, check the real endpoint,
and run it there.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from evalhydra.cli.commands import SUBCOMMANDS, CommandParser
from evalhydra.core.errors import EvalHydraError
from evalhydra.job.exit_codes import ExitCode

__all__ = ["STARTER_FILES", "main", "next_steps"]

_EVAL = """\
# An eval in evalhydra's own format: dataset_path and matcher are all it needs.
# Every field: docs/eval-files.md. Paths are relative to this file.
id: capitals
description: Answers a question about a passage it was given.
dataset_path: capitals.jsonl
matcher:
  kind: includes          # the reply contains the case's ideal answer
  case_sensitive: false
default_run_count: 1      # trials per case (trials=5 on the command line overrides it)
"""

_CASES = [
    ("austria", "Vienna is the capital of Austria.", "Austria", "Vienna"),
    ("peru", "Lima is the capital of Peru.", "Peru", "Lima"),
    ("kenya", "Nairobi is the capital of Kenya.", "Kenya", "Nairobi"),
]

_SERVICE = """\
# Any OpenAI-compatible chat-completions endpoint: OpenAI, vLLM, llama.cpp, LiteLLM, your product.
# The URL and model come from the environment (or .env); the key is read at call time, never stored.
name: my_model
base_url: ${oc.env:OPENAI_BASE_URL,http://127.0.0.1:8000/v1}   # OpenAI: https://api.openai.com/v1
default_model: ${oc.env:OPENAI_MODEL,gpt-4o-mini}
api_key_env: OPENAI_API_KEY
timeout_ms: 60000
"""

_ENV_EXAMPLE = """\
# Copy to .env and fill in: evalhydra reads .env from the folder it runs in, then from this project
# (the environment wins).
OPENAI_BASE_URL=http://127.0.0.1:8000/v1
OPENAI_API_KEY=
OPENAI_MODEL=my-model
"""

_GITIGNORE = ".env\noutputs/\n"


def _cases() -> str:
    return "".join(json.dumps({"id": case_id, "input": f"{text} Which city is the capital of {country}? "
                                                     "Answer with the city's name.", "ideal": ideal}) + "\n"
                   for case_id, text, country, ideal in _CASES)


#: Each file ``init`` writes, relative to the project folder, and its text.
STARTER_FILES: dict[str, str] = {
    "evals/capitals.yaml": _EVAL,
    "evals/capitals.jsonl": _cases(),
    "conf/service/my_model.yaml": _SERVICE,
    ".env.example": _ENV_EXAMPLE,
    ".gitignore": _GITIGNORE,
}


def next_steps(folder: str) -> list[str]:
    """The commands to run the new project, in order (``cd`` first when it is elsewhere)."""
    steps = [f"cd {shlex.quote(folder)}"] if folder != "." else []
    return steps + [
        "evalhydra registry=. eval=capitals                              # on the built-in mock",
        "cp .env.example .env                                             # then set your endpoint",
        "evalhydra check --config-dir conf registry=. service=my_model eval=capitals",
        "evalhydra --config-dir conf registry=. service=my_model eval=capitals trials=3",
    ]


def build_parser() -> argparse.ArgumentParser:
    """The ``evalhydra init`` argument parser."""
    parser = CommandParser(prog="evalhydra init", description=SUBCOMMANDS["init"] + ".",
                           epilog="Example: evalhydra init my-evals && cd my-evals && "
                                  "evalhydra registry=. eval=capitals")
    parser.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the project folder (default: .)")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")
    return parser


def main(argv: Sequence[str]) -> int:
    """Write the starter project; return the exit code (2 when a file exists and --force is not given)."""
    args = build_parser().parse_args(list(argv))
    root = Path(args.dir)
    clash = [rel for rel in STARTER_FILES if (root / rel).exists()]
    if clash and not args.force:
        error = EvalHydraError(f"{root / clash[0]}: exists; init writes a new project.",
                               f"Choose an empty folder (evalhydra init DIR), or add --force to overwrite "
                               f"{len(clash)} file(s).")
        print(f"error: {error}", file=sys.stderr)
        return ExitCode.USAGE
    for rel, text in STARTER_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(STARTER_FILES)} files in {root.resolve()}: an eval (evals/capitals.yaml) with its "
          "dataset, a service for an OpenAI-compatible endpoint (conf/service/my_model.yaml), .env.example.")
    print("next:")
    for step in next_steps(args.dir):
        print(f"  {step}")
    return ExitCode.OK
