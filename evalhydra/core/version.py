"""The package's version (``evalhydra.__version__``), kept in the foundation so every layer can name it."""

__all__ = ["__version__"]

__version__ = "0.1.0"
