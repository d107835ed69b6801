"""One generic registry for games, strategies and backends: a decorator plus explicit imports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from stratagem.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object table. Registration order is kept; lookups suggest close names."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, item: T, name: str | None = None) -> T:
        """Register ``item`` under ``name`` (default: its ``name`` attribute or ``__name__``)."""
        # a class's ``name`` may be a property (not a str) until instantiated: then its __name__
        key = name or getattr(item, "name", None)
        if not isinstance(key, str) or not key:
            key = getattr(item, "__name__", None)
        if not isinstance(key, str):
            raise TypeError(f"{self.kind}: register {item!r} with an explicit name")
        if key in self._items:
            raise ValueError(f"{self.kind} {key!r} is registered twice")
        self._items[key] = item
        return item

    def __call__(self, item: T) -> T:
        """Use the registry itself as a class decorator."""
        return self.register(item)

    def unregister(self, name: str) -> T:
        """Remove and return ``name`` (a test's temporary registration)."""
        return self._items.pop(name)

    def get(self, name: str) -> T:
        """Returns the object registered as ``name``.

        Raises:
            UnknownNameError: No object has that name; the message suggests close ones.
        """
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._items) from None

    def names(self) -> list[str]:
        """Returns the registered names in registration order."""
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[str, T]]:
        """Returns the (name, object) pairs in registration order."""
        return list(self._items.items())


def lazy(factory: Callable[[], T]) -> Callable[[], T]:
    """Memoise a zero-argument factory (used to import heavy backends only when asked for)."""
    cache: list[T] = []

    def get() -> T:
        if not cache:
            cache.append(factory())
        return cache[0]

    return get
