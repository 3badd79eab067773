"""``evalhydra import openai-evals``: OpenAI Evals API definitions into a registry evalhydra runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.messages import MessageError, check_messages
from evalhydra.core.text import command_line, override, visible
from evalhydra.job.exit_codes import ExitCode
from evalhydra.matchers.factory import validate_matcher
from evalhydra.matchers.grader_checks import needs_judge
from evalhydra.registry.definitions import load_registry
from evalhydra.registry.openai_evals import ImportedEval, RunSource, convert, read_object, write_registry

__all__ = ["cmd_import", "configure_import"]

#: What the import reads (one kind, named so that others can follow).
KINDS = ("openai-evals",)


def cmd_import(args: argparse.Namespace) -> int:
    """Turn an OpenAI Evals eval (client.evals.retrieve(...).model_dump(), saved as JSON) and its
    runs (client.evals.runs.retrieve(...)) into registry evals that run unchanged: one per run,
    its items rendered through the run's input_messages template, its testing_criteria graded
    by the openai_graders matcher. Without a run, --data gives the items and each item's
    input (or --input-ref) is sent. Model graders (score_model, label_model, cosine) ask
    --judge-service: the mock's judge by default, so the suite runs offline.

    Examples:
      evalhydra import openai-evals eval.json run.json --out registry
      evalhydra import openai-evals eval.json run.json --file file-abc123=items.jsonl --out registry
      evalhydra import openai-evals eval.json --data items.jsonl --out registry
    """
    eval_path = Path(args.eval_file)
    eval_obj = read_object(eval_path)
    sources = [RunSource(str(Path(p)), run=read_object(Path(p))) for p in args.run_files]
    if not sources:
        if not args.data:
            raise EvalHydraError(f"{eval_path}: no run object and no --data.",
                                 "Pass a run (client.evals.runs.retrieve(...)) or --data ITEMS.jsonl.")
        sources = [RunSource(args.data, items_path=Path(args.data), input_reference=args.input_ref)]
    criteria = {"testing_criteria": eval_obj.get("testing_criteria") or []}
    judge = args.judge_service if needs_judge(criteria) else None
    imported = convert(eval_obj, sources, where=str(eval_path), judge_service=judge,
                       files=_files(args.file or [], [Path(p).parent for p in args.run_files]))
    out = Path(args.out)
    for item in imported:
        _check(item, out, eval_path)
    written = write_registry(out, imported, force=args.force)
    load_registry(out.resolve())  # the definitions load as a run would read them
    for item in imported:
        _print_next_steps(item, out)
    print(visible(f"wrote {len(written)} files under {out}", lines=False))
    return ExitCode.OK


def _files(given: list[str], folders: list[Path]) -> dict[str, Path]:
    """``--file ID=PATH`` pairs, and any ``file-*.jsonl`` beside the runs."""
    found = {p.stem: p for folder in folders for p in sorted(folder.glob("file-*.jsonl"))}
    for pair in given:
        file_id, sep, path = pair.partition("=")
        if not sep or not file_id or not path:
            raise EvalHydraError(f"--file {pair}: must be FILE_ID=PATH.",
                                 "For example: --file file-abc=items.jsonl")
        found[file_id] = Path(path)
    return found


def _check(item: ImportedEval, out: Path, eval_path: Path) -> None:
    """Refuse, before anything is written, what a run would refuse: the criteria, the messages."""
    validate_matcher(item.spec["matcher"], f"{eval_path}: $", registry_root=out)
    for number, line in enumerate(item.lines, start=1):
        if "sample" in line:  # a recorded output: its input is not sent
            continue
        try:
            check_messages(line["input"])
        except MessageError as exc:
            raise EvalHydraError(f"{item.eval_id}: item {number}: its messages {exc}.") from None


def _print_next_steps(item: ImportedEval, out: Path) -> None:
    """The imported eval and the commands that run it (values from the export quoted for pasting)."""
    criteria = ", ".join(c["name"] for c in item.spec["matcher"]["testing_criteria"])
    print(visible(f"{item.eval_id}: {len(item.lines)} cases; criteria: {criteria}", lines=False))
    api = ["service.api=responses"] if item.api == "responses" else []
    run = ["python", "-m", "evalhydra", override("registry", out), override("eval", item.eval_id), *api]
    if item.recorded:
        print(f"  its recorded outputs, graded: {command_line(*run, 'service=recorded')}")
        return
    print(f"  offline, on the mock: {command_line(*run)}")
    if item.model:
        judged = ["judge_service=openai"] if needs_judge(item.spec["matcher"]) else []  # not the mock's
        on_model = command_line(*run, "service=openai", override("service.model", item.model), *judged)
        print(f"  on its model: {on_model}")


def configure_import(p: argparse.ArgumentParser) -> None:
    """The options of ``evalhydra import``."""
    p.add_argument("kind", choices=KINDS,
                   help="what to import: openai-evals (the OpenAI Evals API's objects)")
    p.add_argument("eval_file", metavar="EVAL.json",
                   help="the eval object, as client.evals.retrieve returns it")
    p.add_argument("run_files", nargs="*", metavar="RUN.json",
                   help="run objects, as client.evals.runs.retrieve returns them (one registry eval each)")
    p.add_argument("--out", required=True, metavar="REGISTRY", help="the registry folder to write into")
    p.add_argument("--data", metavar="ITEMS.jsonl", help="without a run: the items ({\"item\": {...}} lines)")
    p.add_argument("--input-ref", default="item.input", metavar="item.FIELD",
                   help="without a run: the item field sent to the model (default item.input)")
    p.add_argument("--file", action="append", metavar="FILE_ID=PATH",
                   help="a run's file_id source, downloaded (file-*.jsonl beside a run is found by itself)")
    p.add_argument("--judge-service", default="mock_judge", metavar="NAME",
                   help="the service model graders call (default mock_judge: offline)")
    p.add_argument("--force", action="store_true", help="write over existing files")
