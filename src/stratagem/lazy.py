"""Names a package exports from its submodules, loaded on first use (PEP 562), so importing the
package costs nothing until a name is asked for (``import stratagem`` and command help stay
light while ``from stratagem.training.sepo import train_sepo`` still works)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, exports: Mapping[str, str], fallback: str | None = None
) -> Callable[[str], Any]:
    """Returns the ``__getattr__`` of ``package``: name -> ``package.<exports[name]>.name``;
    any other name is looked up in ``package.<fallback>`` when one is given (a module that
    became a package keeps its old names), else is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        # a private name (an interpreter's or a shell's probe) never loads the fallback
        module = exports.get(name, None if name.startswith("_") else fallback)
        if module is not None:
            loaded = importlib.import_module(f"{package}.{module}")  # its errors are its own
            if hasattr(loaded, name):
                return getattr(loaded, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
