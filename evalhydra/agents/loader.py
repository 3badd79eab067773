"""Load agent test cases: directories with instruction.txt, validator.py, workdir/.

A case directory's basename is the case name. ``instruction.txt`` is sent to
the agent verbatim; ``validator.py`` must define a module-level ``validator``
implementing :class:`~evalhydra.agents.ValidatorProtocol`; the optional
``workdir/`` is copied into every trial's working directory.

Every problem of every case is collected and raised together, before any
trial runs, as one :class:`~evalhydra.core.errors.EvalHydraError`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalhydra.agents.models import ValidatorProtocol
from evalhydra.agents.zrb_compat import provide_zrb_names
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.usercode import UserCodeImportError, import_file

__all__ = ["AgentCase", "CaseLoadError", "load_cases", "load_validator"]

INSTRUCTION_FILE = "instruction.txt"
VALIDATOR_FILE = "validator.py"
WORKDIR = "workdir"


class CaseLoadError(Exception):
    """One case's problem; :func:`load_cases` gathers these into one EvalHydraError."""


@dataclass(frozen=True)
class AgentCase:
    """One loaded test case.

    Attributes:
        name: The directory's basename; names the case in results and paths.
        path: The case directory (absolute).
        instruction: ``instruction.txt``, verbatim.
        validator: The module-level ``validator`` object.
        workdir: The ``workdir/`` to copy into each trial, or None.
        content_hash: SHA-256 of instruction.txt, validator.py and every
            workdir file (path and bytes), for resume keys.
    """

    name: str
    path: Path
    instruction: str
    validator: ValidatorProtocol
    workdir: Path | None = None
    content_hash: str = ""

    @property
    def id(self) -> str:
        """The case id: its name."""
        return self.name


def load_cases(cases: str | Path | Sequence[str | Path], root: Path) -> list[AgentCase]:
    """Load the cases an eval selects with ``cases:``.

    Each entry is a case directory (it holds ``instruction.txt``) or a
    collection whose subdirectories holding ``instruction.txt`` are cases.

    Args:
        cases: One directory or a list; relative paths are taken from ``root``.
        root: The registry root.

    Returns:
        The cases, in the order given (a collection's cases sorted by name).

    Raises:
        EvalHydraError: ``Test case loading failed: <the first problem>``, with the
            others (one per line) and the expected layout as its hint.
    """
    entries = [cases] if isinstance(cases, str | Path) else list(cases)
    errors: list[str] = []
    if not entries:
        errors.append("eval.cases is empty: give a directory or a list of case directories")
    loaded: list[AgentCase] = []
    for case_dir in _case_dirs(entries, Path(root), errors):
        try:
            loaded.append(load_case(case_dir))
        except CaseLoadError as exc:
            errors.append(str(exc))
    errors.extend(_duplicate_names(loaded))
    if errors:
        first, *more = errors
        raise EvalHydraError(f"Test case loading failed: {first}", "\n".join(
            [*(f"  {error}" for error in more), _CASE_LAYOUT_HINT]))
    return loaded


_CASE_LAYOUT_HINT = (f"A case is a directory with {INSTRUCTION_FILE} and a {VALIDATOR_FILE} that sets "
                     "validator = YourValidator() (docs/configuration.md, agent CLIs); "
                     "eval.cases names them or their folder.")


def _case_dirs(entries: Iterable[Any], root: Path, errors: list[str]) -> list[Path]:
    found: list[Path] = []
    for entry in entries:
        path = Path(str(entry)).expanduser()
        path = (path if path.is_absolute() else root / path).resolve()
        if not path.exists():
            errors.append(f"Test case directory does not exist: {path}")
        elif not path.is_dir():
            errors.append(f"Test case path is not a directory: {path}")
        elif (path / INSTRUCTION_FILE).is_file():
            found.append(path)
        elif _looks_like_a_case(path):
            errors.append(f"Test case directory {path} has no {INSTRUCTION_FILE}")
        else:
            subdirs = sorted(p for p in path.iterdir() if p.is_dir())
            cases = [p for p in subdirs if (p / INSTRUCTION_FILE).is_file()]
            errors += [f"Test case directory {p} has no {INSTRUCTION_FILE}" for p in subdirs
                       if p not in cases and _looks_like_a_case(p)]
            if not subdirs or not (cases or any(_looks_like_a_case(p) for p in subdirs)):
                errors.append(f"No test cases in {path}: no {INSTRUCTION_FILE} in it or its subdirectories")
            found.extend(cases)
    return list(dict.fromkeys(found))


def _looks_like_a_case(path: Path) -> bool:
    """A directory meant as a case: it has a validator.py or a workdir/ (but maybe no instruction.txt)."""
    return (path / VALIDATOR_FILE).is_file() or (path / WORKDIR).is_dir()


def _duplicate_names(loaded: list[AgentCase]) -> list[str]:
    seen: dict[str, Path] = {}
    errors = []
    for case in loaded:
        if case.name in seen:
            errors.append(f"Test case name {case.name!r} is used twice: {seen[case.name]} and {case.path}")
        seen.setdefault(case.name, case.path)
    return errors


def load_case(case_dir: Path) -> AgentCase:
    """Load one case directory.

    Raises:
        CaseLoadError: Naming the case and what is wrong.
    """
    name = case_dir.name
    instruction_path = case_dir / INSTRUCTION_FILE
    if not instruction_path.is_file():
        raise CaseLoadError(f"Test case {name!r} is missing {INSTRUCTION_FILE} in {case_dir}")
    validator_path = case_dir / VALIDATOR_FILE
    if not validator_path.is_file():
        raise CaseLoadError(f"Test case {name!r} is missing {VALIDATOR_FILE} in {case_dir}")
    try:
        validator = load_validator(validator_path)
    except EvalHydraError as exc:
        raise CaseLoadError(f"Test case {name!r}: {exc.message}") from exc
    workdir = case_dir / WORKDIR if (case_dir / WORKDIR).is_dir() else None
    if workdir is not None:
        _check_links(name, workdir)
    return AgentCase(
        name=name,
        path=case_dir,
        instruction=instruction_path.read_text(encoding="utf-8"),
        validator=validator,
        workdir=workdir,
        content_hash=case_hash(case_dir, workdir),
    )


def _check_links(name: str, workdir: Path) -> None:
    """Refuse a workdir holding a symbolic link that points nowhere or loops: copying it into
    each trial would fail mid-run."""
    for folder, dirs, files in os.walk(workdir):
        for entry in (*dirs, *files):
            path = Path(folder) / entry
            if not path.is_symlink():
                continue
            try:
                path.resolve(strict=True)
            except (OSError, RuntimeError) as exc:
                what = "loops" if "loop" in str(exc).lower() else "points to nothing"
                rel = path.relative_to(workdir.parent).as_posix()
                raise CaseLoadError(f"Test case {name!r}: {rel} is a symbolic link that {what}"
                                    f" (-> {os.readlink(path)}); remove it or point it at a file") from None


def case_hash(case_dir: Path, workdir: Path | None) -> str:
    """Hash what defines a case: instruction.txt, validator.py and the workdir's files."""
    digest = hashlib.sha256()
    files = [case_dir / INSTRUCTION_FILE, case_dir / VALIDATOR_FILE]
    if workdir is not None:
        files += sorted(p for p in workdir.rglob("*") if p.is_file())
    for path in files:
        digest.update(path.relative_to(case_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def load_validator(path: Path) -> ValidatorProtocol:
    """Import ``path`` and return its module-level ``validator``, protocol-checked.

    Args:
        path: A ``validator.py`` file.

    Raises:
        EvalHydraError: The file cannot be imported, has no ``validator``, or the
            object does not implement ``ValidatorProtocol``.
    """
    module = _import_file(Path(path).resolve())
    if not hasattr(module, "validator"):
        raise EvalHydraError(f"{path} must define a module-level 'validator' object")
    validator = module.validator
    if isinstance(validator, type):
        raise EvalHydraError(
            f"'validator' in {path} is the class {validator.__name__}, not an instance",
            f"Write: validator = {validator.__name__}()",
        )
    if not isinstance(validator, ValidatorProtocol) or not callable(validator.validate):
        raise EvalHydraError(
            f"'validator' in {path} does not implement ValidatorProtocol "
            f"(got {type(validator).__name__}); it needs a method "
            "validate(output_dir, log_content, trace=None) -> ValidationResult"
        )
    return validator


def _import_file(path: Path) -> Any:
    provide_zrb_names()  # validators written for zrb import zrb_llm_evaluator's names
    try:
        return import_file(path, "evalhydra_agent_validator_")
    except UserCodeImportError as exc:
        raise EvalHydraError(f"{path} {exc}") from None
