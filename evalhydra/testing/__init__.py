"""Shipped stand-ins that power the offline default and the tests (like ``trio.testing``).

* :mod:`~evalhydra.services.mock`: the OpenAI-compatible mock server (``python -m evalhydra.services.mock``).
* :mod:`~evalhydra.agents.fake_agent`: a zrb-compatible fake agent CLI.
* :mod:`~evalhydra.testing.judges`: a scripted judge client for matcher tests.
"""
