"""The foundation every other layer stands on; it imports nothing else of evalhydra.

* :mod:`~evalhydra.core.errors`: :class:`EvalHydraError`, the one error users see.
* :mod:`~evalhydra.core.values`: the immutable value types of a run (services,
  completions, match results) and the verdict names.
* :mod:`~evalhydra.core.messages`: chat messages and their validation.
* :mod:`~evalhydra.core.strictjson`: JSON decoding that refuses what JSON does not allow.
* :mod:`~evalhydra.core.zig_numbers`: zig_eval's number spelling, for byte-identical reports.
* :mod:`~evalhydra.core.trio_util`: trio helpers on the hot path (a limiter held
  without a scheduling round when a token is free, a cheap run clock).
"""
