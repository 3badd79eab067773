"""No test depends on the base interpreter: the suite passes in a venv, activated or not.

A subprocess started as ``python`` or with a script found on ``PATH`` runs whatever interpreter
the shell finds (the base one, without the test extras, when the venv is not activated); one
started with ``-S`` loses the venv's site-packages, which ``site`` adds. Tests start
``sys.executable``, find console scripts with :func:`tests.helpers.installed_script`, and pass
their own site-packages to a ``-S`` child.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.conftest import REPO

TESTS = REPO / "tests"
#: Programs a test may look up on PATH: Debian's, which .ci/run installs.
SYSTEM_PROGRAMS = frozenset({"chromium", "chromium-browser"})
_INTERPRETERS = frozenset({"python", "python3", "pytest", "pip"})


def _calls(tree: ast.AST) -> Iterator[ast.Call]:
    yield from (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def _name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        base = func.value.id if isinstance(func.value, ast.Name) else ""
        return f"{base}.{func.attr}"
    return func.id if isinstance(func, ast.Name) else ""


def _argv_literals(call: ast.Call) -> list[str]:
    """The string literals of a list given as a call's first argument (an argv)."""
    if call.args and isinstance(call.args[0], ast.List):
        return [
            e.value for e in call.args[0].elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
    return []


def _site_passed(call: ast.Call) -> bool:
    """A ``-S`` child that is handed this process's site-packages (``site_dirs``), or that runs
    ``site.main()`` itself once its path is set."""
    return any(
        (isinstance(n, ast.Name) and n.id == "site_dirs")
        or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "site.main()" in n.value)
        for n in ast.walk(call)
    )


def base_interpreter_uses(source: str, path: str) -> list[str]:
    """Each place in ``source`` that runs or finds something outside this interpreter's environment."""
    found = []
    for call in _calls(ast.parse(source)):
        where = f"{path}:{call.lineno}"
        name = _name(call)
        argv = _argv_literals(call)
        if (
            name == "shutil.which"
            and call.args
            and isinstance(call.args[0], ast.Constant)
            and call.args[0].value not in SYSTEM_PROGRAMS
        ):
            found.append(f"{where}: shutil.which({call.args[0].value!r}): use installed_script()")
        if (
            argv
            and argv[0] in _INTERPRETERS
            and isinstance(call.args[0], ast.List)
            and isinstance(call.args[0].elts[0], ast.Constant)
        ):
            found.append(f"{where}: runs {argv[0]!r} from PATH: use sys.executable")
        if "-S" in argv and not _site_passed(call):
            found.append(f"{where}: -S without this interpreter's site-packages (site_dirs)")
    return found


def test_no_test_reaches_for_the_base_interpreter() -> None:
    problems = [
        p
        for path in sorted(TESTS.rglob("*.py"))
        for p in base_interpreter_uses(path.read_text(), str(path.relative_to(REPO)))
    ]
    assert problems == []


def test_the_check_finds_each_kind_of_reach() -> None:
    bad = (
        "import shutil, subprocess, sys\n"
        "shutil.which('ray')\n"
        "subprocess.run(['python', '-m', 'x'])\n"
        "subprocess.run([sys.executable, '-S', '-c', 'import x'])\n"
    )
    assert [p.split(": ", 1)[0] for p in base_interpreter_uses(bad, "t.py")] == ["t.py:2", "t.py:3", "t.py:4"]
    good = (
        "import shutil, subprocess, sys\n"
        "shutil.which('chromium')\n"
        "subprocess.run([sys.executable, '-S', '-c', 'x', site_dirs])\n"
    )
    assert base_interpreter_uses(good, "t.py") == []
