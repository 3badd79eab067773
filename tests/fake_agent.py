#!/usr/bin/env python3
"""Executable fake agent CLI for the agent tests.

A thin wrapper: it runs ``evalhydra/testing/fake_agent.py`` from this checkout
by path (stdlib only, so it works with any ``python3`` and skips importing
the ``evalhydra`` package). See that module for the directives it obeys.
"""

import runpy
from pathlib import Path

if __name__ == "__main__":
    target = Path(__file__).resolve().parents[1] / "evalhydra" / "testing" / "fake_agent.py"
    runpy.run_path(str(target), run_name="__main__")
