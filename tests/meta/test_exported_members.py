"""The package root's public names: exactly ``__all__``, each importable from the root (as httpx tests)."""

from __future__ import annotations

import evalhydra


def test_all_is_sorted_and_every_name_resolves_from_the_root() -> None:
    assert evalhydra.__all__ == sorted(evalhydra.__all__)
    for name in evalhydra.__all__:
        assert getattr(evalhydra, name) is not None, name
    assert evalhydra.EvalHydraError.__module__ == "evalhydra.core.errors"
    assert {evalhydra.evaluate.__module__, evalhydra.rejudge.__module__} == {"evalhydra.api"}


def test_dir_lists_the_public_names_and_others_are_attribute_errors() -> None:
    assert set(evalhydra.__all__) <= set(dir(evalhydra))
    try:
        evalhydra.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
