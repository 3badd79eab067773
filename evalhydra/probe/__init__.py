"""``evalhydra probe tools``: is a server's tool calling conformant? Deterministic probes sent to an
OpenAI-compatible endpoint, each check pass, fail or n/a with the raw evidence.

* :mod:`~evalhydra.probe.catalog`: the probes' requests: prompts any model follows, fixed seed.
* :mod:`~evalhydra.probe.exchange`: one probe sent, its reply kept raw and read by evalhydra's reader.
* :mod:`~evalhydra.probe.checks`: the chat-completions checks (calls, ``tool_choice``, schemas).
* :mod:`~evalhydra.probe.stream_checks`: the streaming checks (deltas, indexes, UTF-8, usage).
* :mod:`~evalhydra.probe.turns`: probes over turns: tool results sent back, the Responses API.
* :mod:`~evalhydra.probe.run`: probe an endpoint, every check's verdict.
* :mod:`~evalhydra.probe.output`: the report as text, JSON and JUnit XML.
* :mod:`~evalhydra.probe.recover`: the calls a recorded reply holds, read as a tolerant client would.
* :mod:`~evalhydra.probe.attribution`: two runs' differing cells, each a wire fault or the model's.
"""
