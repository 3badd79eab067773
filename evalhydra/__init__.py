"""evalhydra: run declarative LLM eval suites, store every result in SQLite, report and compare."""

__version__ = "0.1.0"
