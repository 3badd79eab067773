"""Configuration: the typed schema, Hydra composition, defaults, secret redaction.

* :mod:`~evalhydra.config.schema`: structured configs, the typed shape of every group.
* :mod:`~evalhydra.config.compose`: registering the schema and composing a config
  (the only package below :mod:`evalhydra.cli` that imports Hydra).
* :mod:`~evalhydra.config.registry_options`: a registry's services and evals as
  config-group options (the Hydra plugin in ``hydra_plugins/`` adapts it).
* :mod:`~evalhydra.config.defaults`: defaults shared by the run and the subcommands.
* :mod:`~evalhydra.config.redact`: what never reaches a stored config.
"""
