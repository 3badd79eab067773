"""The foundation every other layer stands on; it imports nothing else of evalhydra.

* :mod:`~evalhydra.core.errors`: :class:`EvalHydraError`, the one error users see.
* :mod:`~evalhydra.core.values`: the immutable value types of a run (services,
  completions, match results) and the verdict names.
* :mod:`~evalhydra.core.messages`: chat messages and their validation.
* :mod:`~evalhydra.core.strictjson`: JSON decoding that refuses what JSON does not allow.
* :mod:`~evalhydra.core.zig_numbers`: zig_eval's number spelling, for byte-identical reports.
* :mod:`~evalhydra.core.trio_util`: trio helpers on the hot path (a limiter held
  without a scheduling round when a token is free, a cheap run clock).
* :mod:`~evalhydra.core.envfiles`: ``.env`` files of the current folder and the project, and where
  each value came from.
* :mod:`~evalhydra.core.openai_templates`: openAI Evals templates: ``{{ item.question }}``, ``{{
  sample.output_text }}``, ``{{ item.a.b[0] }}``.
* :mod:`~evalhydra.core.safeyaml`: YAML from outside, read safely: no aliases, bounded nesting.
* :mod:`~evalhydra.core.text`: text from outside shown safely: control characters made visible.
* :mod:`~evalhydra.core.toolnames`: function names as OpenAI's chat API accepts them
  (``^[A-Za-z0-9_-]{1,64}$``).
* :mod:`~evalhydra.core.untrusted_schema`: JSON Schemas from outside checked without I/O and in
  bounded time.
* :mod:`~evalhydra.core.usercode`: user code (tools, tool classes, custom matchers, validators)
  under a cell's containment.
* :mod:`~evalhydra.core.version`: the package's version (``evalhydra.__version__``), kept in the
  foundation so every layer can name it.
* :mod:`~evalhydra.core.masking`: every secret a run sends replaced by ``***`` in text and values.
* :mod:`~evalhydra.core.outfiles`: files a user names on the command line, written or refused
  with a clear error.
"""
