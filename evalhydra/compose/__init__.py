"""Stage one of a run: ``conf/`` and the registry composed into one Hydra config.

* :mod:`~evalhydra.compose.compose`: registering the schema and composing a config
  (the only package below :mod:`evalhydra.cli` that imports Hydra).
* :mod:`~evalhydra.compose.registry_options`: a registry's services and evals as
  config-group options (the Hydra plugin in ``hydra_plugins/`` adapts it).
* :mod:`~evalhydra.compose.hydra_errors`: Hydra's and OmegaConf's errors as one ``error:`` line
  with a fix (the command line and :func:`evalhydra.evaluate` both use it).
"""
