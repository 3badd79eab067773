"""Matchers: score an output against a case."""
