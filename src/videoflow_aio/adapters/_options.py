"""What every engine's connection object checks of its keywords (``NatsConnection``,
``RedisConnection``, ``EtcdConnection``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from ..contracts.errors import ValidationError

C = TypeVar("C")


def check_known(options: Mapping[str, object], declared: Mapping[str, object]) -> None:
    """A keyword the options TypedDict does not declare (``declared``: its
    ``__annotations__``) is a ``TypeError``, as for any unexpected keyword argument."""
    unknown = sorted(set(options) - set(declared))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")


def refuse_beside(kind: str, given: Iterable[str]) -> None:
    """Keywords given beside a ready ``kind`` connection belong to it: ``ValidationError``."""
    names = sorted(given)
    if names:
        raise ValidationError(
            f"{', '.join(names)}: set on the {kind}, not beside it", field=names[0]
        )


def connection_of(kind: type[C], url: C | str, options: Mapping[str, Any]) -> C:
    """``url`` itself when it is a ``kind`` connection (then no keyword may be given: they
    belong to the connection), else a ``kind`` made from the URL and the keywords."""
    if isinstance(url, kind):
        refuse_beside(kind.__name__, options)
        return url
    return cast(Callable[..., C], kind)(url, **options)
