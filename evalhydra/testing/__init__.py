"""Test helpers shipped with the package, which the package itself never imports (like ``trio.testing``).

* :mod:`~evalhydra.testing.judges`: a scripted judge client for matcher tests.

The built-in mock is a service (:mod:`evalhydra.services.mock`) and the fake agent an
agent CLI (:mod:`evalhydra.agents.fake_agent`): the default run and the demos use them.
"""
