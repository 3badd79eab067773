"""Configuration's typed shape: the schema, its defaults, and what never reaches a stored config.

* :mod:`~evalhydra.config.schema`: structured configs, the typed shape of every group.
* :mod:`~evalhydra.config.defaults`: defaults shared by the run and the subcommands
  (standard library only, so the store commands start without OmegaConf).
* :mod:`~evalhydra.config.redact`: what never reaches a stored config.

Composing a config with Hydra is :mod:`evalhydra.compose`'s job.

* :mod:`~evalhydra.config.fielddocs`: the config schema's own field docs, and the config shown with
  a meaning per option (``--help``).
"""
