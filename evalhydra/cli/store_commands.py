"""Subcommands over the store: ``runs``, ``report``, ``view``, ``compare``, ``results``, ``merge``,
``list``, and the table of all of them with ``query`` (:mod:`evalhydra.cli.query`) and ``power``
(:mod:`evalhydra.cli.power`). Names and help are in :mod:`evalhydra.cli.commands`; ``rejudge`` is
:mod:`evalhydra.cli.rejudge`.

They are plain argparse commands (Hydra owns the run itself). Each takes
``--store PATH`` (default: the configured ``store.path``) and exits 0 on
success, 1 when a gate fails (``compare --fail-on-regression``), 2 on a
usage or user error.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evalhydra.analysis.comparison import Target, compare, parse_target, regressions
from evalhydra.analysis.selection import DURATION_SQL, STATUS_SQL, TRIAL_ORDER_SQL, select_runs
from evalhydra.cli.batches import cmd_batches, configure_batches
from evalhydra.cli.cache import cmd_cache, configure_cache
from evalhydra.cli.callbacks import sweep_run_ids
from evalhydra.cli.catalog import eval_rows, service_rows
from evalhydra.cli.commands import STORE_COMMANDS, STORELESS_COMMANDS, CommandParser
from evalhydra.cli.ingest import cmd_ingest, configure_ingest
from evalhydra.cli.labels import cmd_calibrate, cmd_label, configure_calibrate, configure_label
from evalhydra.cli.openai_import import cmd_import, configure_import
from evalhydra.cli.power import cmd_power, configure_power
from evalhydra.cli.query import cmd_query, configure_query
from evalhydra.cli.store_access import add_format, add_store, format_rows, fraction, open_read_only
from evalhydra.cli.view import cmd_view, configure_view
from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.core.text import visible
from evalhydra.job.exit_codes import ExitCode
from evalhydra.probe.attribution import attribute_server
from evalhydra.probe.output import attribution_json, attribution_text
from evalhydra.registry.definitions import load_registry, registry_origin, resolve_registry_root
from evalhydra.reports.comparison import render
from evalhydra.reports.writer import REPORT_FILES, normalize_formats, write_run_reports
from evalhydra.store.db import Store
from evalhydra.store.merge import merge_stores
from evalhydra.store.rows import RESULT_STATUSES, infra_error_sql, verdict_sql
from evalhydra.store.runinfo import selection_of, shown_status

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="evalhydra", description="Inspect and report on the evalhydra store."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in STORE_COMMANDS.items():
        fn = HANDLERS[name]
        command = sub.add_parser(name, help=help_text, description=inspect.cleandoc(fn.__doc__ or help_text),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        if name not in STORELESS_COMMANDS:
            add_store(command)
        CONFIGURE[name](command)
        command.set_defaults(handler=fn)
    return parser


def main(argv: Sequence[str]) -> int:
    """Run one store subcommand; return the exit code."""
    args = _parser().parse_args(list(argv))
    try:
        return int(args.handler(args) or 0)
    except EvalHydraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE


# -- runs ---------------------------------------------------------------------
def cmd_runs(args: argparse.Namespace) -> int:
    """List past runs, newest first: id, start time, evals, services, cells, pass rate
    (infrastructure errors left out), errors, status (a run whose process is gone is
    "interrupted (process gone)"), the verdict its exit code gave (passed, gate failed,
    could not measure, interrupted, usage error), and what part of its cases a partial run
    ran (run.limit=3, run.cases=[…], run.tags=[…], a shard, run.rerun=failed).

    Example: evalhydra runs --limit 10 --format github
    """
    store = open_read_only(args)
    err = infra_error_sql("r.")
    sql = f"""
        select ru.run_id, ru.started_at, group_concat(distinct r.eval_id) as evals,
          group_concat(distinct r.service_name) as services, count(r.cell_key) as cells,
          round(100.0 * sum(r.passed) / nullif(count(r.cell_key) - sum({err}), 0), 1) as pass_pct,
          coalesce(sum({err}), 0) as errors, ru.status, {_VERDICT_SQL} as verdict,
          ru.config as partial, ru.hostname, ru.pid
        from runs ru left join run_cells rc on rc.run_id = ru.run_id
        left join results r on r.cell_key = rc.cell_key and r.run_id = rc.result_run_id
        group by ru.run_id order by ru.started_at desc, ru.run_id limit ?"""
    rows = [_shown_run(row) for row in store.query(sql, [args.limit])]
    print(format_rows(rows, args.format) if rows else "No runs yet.")
    return ExitCode.OK


def _shown_run(row: dict[str, Any]) -> dict[str, Any]:
    """A ``runs`` listing row as a person reads it: the shown status, the partial run's selection."""
    row["status"] = shown_status(row["status"], row.pop("hostname"), row.pop("pid"))
    row["partial"] = selection_of(row["partial"])
    return row


_VERDICT_SQL = verdict_sql("ru.")


def _cfg_runs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=20, help="most runs listed (default: 20)")
    add_format(p)


# -- report -------------------------------------------------------------------
def cmd_report(args: argparse.Namespace) -> int:
    """Regenerate the reports of one or more runs (or a whole sweep) from the store.

    Formats: json (runs.json, evals.json, baseline_comparisons.json, trials.json),
    jsonl (aiwg results.jsonl and summary.json), md (report.md, summary.md), text
    (report.txt), junit (junit.xml), html (report.html: one self-contained page),
    openai (openai_output_items.jsonl and openai_run.json: OpenAI Evals' shapes).
    Regenerating gives the same bytes. Report files of an earlier report in --out that
    this one does not write are removed, so the folder holds one report.

    Example: evalhydra report latest --format md,junit --out outputs/report
    """
    formats = normalize_formats(args.format)
    store = open_read_only(args)
    ids = store.resolve_run_ids(args.run_ids) if args.run_ids else []
    if args.sweep:
        ids += sweep_run_ids(store, Path(args.sweep).resolve())
    if not ids:
        raise EvalHydraError("No runs selected.", "Name RUN_IDs (or 'latest'), or --sweep DIR.")
    written = write_run_reports(store, ids, Path(args.out), formats=formats,
                                baseline_service=args.baseline, cumulative=args.cumulative)
    for stale in sorted(set(Path(args.out).glob("*")) - set(written)):
        if stale.name in REPORT_FILES and stale.is_file():  # an earlier report's, of other runs or formats
            stale.unlink()
    for path in written:
        print(path)
    return ExitCode.OK


def _cfg_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="run ids, unique prefixes, or 'latest'")
    p.add_argument("--sweep", metavar="DIR", help="every run of a Hydra multirun sweep directory")
    p.add_argument("--format", default="json,md",
                   help="comma list of json, jsonl, md, text, junit, html (default: json,md)")
    p.add_argument("--out", default="outputs/report", metavar="DIR",
                   help="output directory (default: outputs/report)")
    p.add_argument("--baseline", metavar="SERVICE",
                   help="baseline service of the comparisons (default: the first, alphabetically)")
    p.add_argument("--cumulative", action="store_true",
                   help="also append the runs' aiwg records to results.jsonl next to the store")


# -- compare ------------------------------------------------------------------
def cmd_compare(args: argparse.Namespace) -> int:
    """Compare a candidate with a baseline, paired case by case and trial by trial.

    Targets are RUN[@SERVICE[:MODEL]] (RUN: id, prefix or 'latest'; without RUN,
    the latest stored result of every cell of that service). Or name the runs
    once (e.g. a sweep's jobs) and pick the sides with --baseline-service and
    --candidate-service (and --baseline-model/--candidate-model).
    Prints per-eval pass rates, zig_eval's delta interval, the paired difference
    with its case-clustered 95% interval and the one-sided p-value of the exact
    sign-flip test, and the regressed and improved cases. Infrastructure errors
    are left out (counted apart). With --fail-on-regression, exits 1 when the
    candidate is significantly worse (Holm-adjusted p < 0.05); fewer than five
    shared cases cannot show that, and the verdict says so.
    With --judge-corrected, a judge-scored eval's difference is also corrected
    for each side's judge (calibrated on labels), and the verdict follows it.
    Conversations whose simulated users differ are refused, naming what differs,
    unless --allow-simulator-change.

    Examples:
      evalhydra compare eval-smoke-1a2b3c4d eval-smoke-5e6f7a8b --fail-on-regression
      evalhydra compare eval-smoke-1a2b3c4d eval-smoke-5e6f7a8b \\
          --baseline-service mock --candidate-service mock_slow
      evalhydra compare @vllm:qwen3-8b @vllm:qwen3-32b --format md
      evalhydra compare @openai:gpt-4.1 @openai:gpt-4.1-mini --eval smoke.reply_ok
      evalhydra compare eval-quality-1a2b3c4d eval-quality-5e6f7a8b --judge-corrected
    """
    store = open_read_only(args)
    if args.attribute_server:
        return _attribute_server(store, args)
    base, cand = _compare_targets(store, args)
    result = compare(store.conn, base, cand, args.eval or (), min_detectable_drop=args.min_detectable,
                     judge_corrected=args.judge_corrected, allow_simulator_change=args.allow_simulator_change)
    print(visible(render(result, args.format, args.limit)))
    if not args.fail_on_regression:
        return ExitCode.OK
    if not any(r["paired"] for r in [*result.rows, result.overall]):
        raise EvalHydraError("--fail-on-regression needs cases scored on both sides; there are none.",
                             "Compare runs of the same evals and trials.")
    return ExitCode.GATE if regressions(result) else ExitCode.OK


def _attribute_server(store: Store, args: argparse.Namespace) -> int:
    """``compare --attribute-server RUN_A RUN_B``: the points RUN_B's serving stack lost to wire faults."""
    if len(args.targets) != 2 or any("@" in t for t in args.targets):
        raise EvalHydraError("--attribute-server needs two runs, RUN_A RUN_B (the same suite and seeds "
                             "through two serving stacks).", "See: evalhydra compare --help")
    run_a, run_b = (store.resolve_run_ids([t])[0] for t in args.targets)
    found = attribute_server(store.conn, run_a, run_b)
    print(json.dumps(attribution_json(found), indent=2, ensure_ascii=False) if args.format == "json"
          else attribution_text(found))
    return ExitCode.OK


def _compare_targets(store: Store, args: argparse.Namespace) -> tuple[Any, Any]:
    picks = (args.baseline_service, args.candidate_service, args.baseline_model, args.candidate_model)
    if any(p is not None for p in picks):
        runs = tuple(store.resolve_run_ids(args.targets))
        where = ",".join(args.targets) or "all runs"
        return (Target(_label(where, args.baseline_service, args.baseline_model), runs,
                       args.baseline_service, args.baseline_model),
                Target(_label(where, args.candidate_service, args.candidate_model), runs,
                       args.candidate_service, args.candidate_model))
    if len(args.targets) != 2:
        raise EvalHydraError("compare needs BASELINE and CANDIDATE (or --baseline-service/"
                             "--candidate-service with runs).", "See: evalhydra compare --help")
    out = []
    for text in args.targets:
        run, service, model = parse_target(text)
        runs = tuple(store.resolve_run_ids([run])) if run else ()
        out.append(Target(text, runs, service, model))
    return out[0], out[1]


def _label(where: str, service: str | None, model: str | None) -> str:
    return where + (f"@{service or '*'}" if service or model else "") + (f":{model}" if model else "")


def _cfg_compare(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="BASELINE CANDIDATE as RUN[@SERVICE[:MODEL]]; or the runs both sides come from")
    p.add_argument("--baseline-service", metavar="NAME")
    p.add_argument("--candidate-service", metavar="NAME")
    p.add_argument("--baseline-model", metavar="NAME")
    p.add_argument("--candidate-model", metavar="NAME")
    p.add_argument("--eval", action="append", metavar="ID", help="only this eval (repeatable)")
    p.add_argument("--format", default="text", choices=["text", "md", "json"])
    p.add_argument("--limit", type=int, default=50, help="cases listed per eval (default: 50)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 if the candidate is significantly worse (Holm-adjusted p < 0.05)")
    p.add_argument("--judge-corrected", action="store_true",
                   help="also compare pass rates corrected for each side's judge (calibrated on"
                        " `evalhydra label` labels); verdicts and --fail-on-regression follow them")
    p.add_argument("--attribute-server", action="store_true",
                   help="RUN_A RUN_B through two serving stacks: each discordant cell a wire fault or a model"
                        " difference, and the points RUN_B's server lost (docs/serving.md)")
    p.add_argument("--allow-simulator-change", action="store_true",
                   help="compare conversations whose simulated users differ (refused otherwise:"
                        " the difference would measure the simulator too)")
    p.add_argument("--min-detectable", type=fraction, default=0.05, metavar="DROP",
                   help="say when the comparison cannot detect a drop this large at 80%% power"
                        " (a fraction; default 0.05 = 5 points)")


# -- results ------------------------------------------------------------------
def cmd_results(args: argparse.Namespace) -> int:
    """List every trial of a run (zrb list): eval, service, model, case, trial,
    status, score, duration, reason, what the model said and the expected answer
    (cut to fit; whole with --full or --format json).

    Example: evalhydra results latest --status FAIL,ERROR
    """
    store = open_read_only(args)
    sel = select_runs(store.conn, store.resolve_run_ids([args.run_id]))
    cond, params = sel.where, list(sel.params)
    if args.status:
        statuses = [s.strip().upper() for s in args.status.split(",") if s.strip()]
        unknown = [s for s in statuses if s not in RESULT_STATUSES]
        if unknown:
            raise EvalHydraError(f"--status {unknown[0]}: no such status.",
                                 did_you_mean(unknown[0], RESULT_STATUSES))
        cond = f"({cond}) and {STATUS_SQL} in ({', '.join('?' * len(statuses))})"
        params += statuses
    sql = (f"select eval_id as eval, service_name as service, model, case_id as 'case',"
           f" run_index as trial, {STATUS_SQL} as status, score,"
           f" round({DURATION_SQL}, 2) as duration_s, coalesce(failure_reason, '') as reason,"
           f" coalesce(output, '') as output, coalesce(ideal, '') as ideal"
           f" from {sel.table} where {cond} order by {TRIAL_ORDER_SQL}")
    if args.limit:
        sql += f" limit {int(args.limit)}"
    rows = list(store.query(sql, params))
    if not (args.full or args.format in ("json", "jsonl", "csv")):
        rows = [_cut(row) for row in rows]
    print(format_rows(rows, args.format) if rows else "No results for that run.")
    return ExitCode.OK


#: Characters of a reason, an output or an ideal shown per row (all of them with --full).
_CUT = {"reason": 40, "output": 30, "ideal": 20}


def _cut(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its long texts shortened to one line at a word, for a table."""
    return {k: textwrap.shorten(" ".join(str(v).split()), _CUT[k], placeholder="…") if k in _CUT and v else v
            for k, v in row.items()}


def _cfg_results(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN_ID", help="run id, unique prefix, or 'latest'")
    p.add_argument("--status", help="only these statuses (comma list, e.g. FAIL,ERROR)")
    p.add_argument("--limit", type=int, default=0, help="most trials listed (default: all)")
    add_format(p)
    p.add_argument("--full", action="store_true",
                   help="show whole reasons, outputs and ideals (json, jsonl and csv always do)")


# -- merge --------------------------------------------------------------------
def cmd_merge(args: argparse.Namespace) -> int:
    """Merge shard stores (one per launcher job or machine) into --store, exactly.

    Example: evalhydra merge --store outputs/all.db shards/*.db
    """
    for shard in args.shards:
        if not Path(shard).exists():
            raise EvalHydraError(f"Shard not found: {shard}.",
                                 "Give the store files the jobs wrote (store.path of each job).")
    total = merge_stores(Path(args.store), [Path(s) for s in args.shards])
    print(f"merged {len(args.shards)} shard(s); {total} results in {args.store}")
    return ExitCode.OK


def _cfg_merge(p: argparse.ArgumentParser) -> None:
    p.add_argument("shards", nargs="+", metavar="SHARD",
                   help="shard stores to merge into --store (each is checked first; none is changed)")


# -- list ---------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    """List every service and eval you can select: those of the packaged conf/ and of
    the registry, with kind, model or case count, and description.

    Example: evalhydra list --registry tests/fixtures/zig_eval_registry
    """
    registry = load_registry(resolve_registry_root(args.registry))
    print(f"registry: {registry.root} ({registry_origin(registry.root)})\n")
    print("services (service=NAME)")
    print(format_rows(service_rows(registry), args.format))
    print("\nevals (eval=ID, or eval=GROUP for every eval of a group)")
    print(format_rows(eval_rows(registry), args.format))
    return ExitCode.OK


def _cfg_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry", default="registry",
                   help="registry folder (default: ./registry if it is one, else the packaged example)")
    add_format(p)


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "runs": cmd_runs,
    "report": cmd_report,
    "compare": cmd_compare,
    "query": cmd_query,
    "results": cmd_results,
    "merge": cmd_merge,
    "list": cmd_list,
    "view": cmd_view,
    "power": cmd_power,
    "cache": cmd_cache,
    "batches": cmd_batches,
    "import": cmd_import,
    "label": cmd_label,
    "calibrate": cmd_calibrate,
    "ingest": cmd_ingest,
}
CONFIGURE: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "runs": _cfg_runs,
    "report": _cfg_report,
    "compare": _cfg_compare,
    "query": configure_query,
    "results": _cfg_results,
    "merge": _cfg_merge,
    "list": _cfg_list,
    "view": configure_view,
    "power": configure_power,
    "cache": configure_cache,
    "batches": configure_batches,
    "import": configure_import,
    "label": configure_label,
    "calibrate": configure_calibrate,
    "ingest": configure_ingest,
}
