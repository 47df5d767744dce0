"""Programs: seeded async functions the explorer runs beside the conformance cases.

A program is a property to hold under every schedule: it builds its own backends (the
reference models), drives them from tasks that interleave, and raises (``assert``) when
the property fails. It receives a :class:`Context`: the run's seed, a PRNG for its own
choices (derived from the seed, apart from the schedule's, so the seed fixes the program
and its schedule together), and the run's ObservationLog, which it hands to the models.
"""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ..contracts.errors import ValidationError
from ..observe import ObservationLog
from ..vtime import Backend

_ID = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$")
_CASE_ID = re.compile(r"^(RTS|MSG|PAY|ALC|MIG)-\d{3}$")


@dataclass(frozen=True)
class Context:
    """What a program gets: ``seed``; ``rng``, the PRNG for the program's own choices;
    ``log``, the ObservationLog of the run (pass it to the models as ``log=``); and the
    async ``backend`` it runs on."""

    seed: int
    rng: random.Random
    log: ObservationLog
    backend: Backend


ProgramFunc = Callable[[Context], Awaitable[None]]
"""A program: an async function of its :class:`Context` that raises when its property fails."""
F = TypeVar("F", bound=ProgramFunc)


@dataclass(frozen=True)
class Program:
    """A named program: ``func(context)`` raises when its property fails."""

    id: str
    title: str
    func: ProgramFunc


PROGRAMS: dict[str, Program] = {}
"""Every registered program by ID (see :func:`program`)."""


def program_rng(seed: int) -> random.Random:
    """The PRNG of a program's own choices under ``seed`` (apart from the schedule's)."""
    return random.Random(f"videoflow-program/{seed}")


def program(id: str, title: str) -> Callable[[F], F]:
    """Register ``func`` as explorer program ``id`` (e.g. ``PROP-MSG-NOTHING-LOST``).

    IDs are upper-case words joined by dashes; the conformance case form (``MSG-001``) is
    reserved for cases.
    """
    if not _ID.match(id) or _CASE_ID.match(id):
        raise ValidationError(
            f"program id {id!r} must be upper-case words joined by dashes (e.g. PROP-X-Y), "
            "not a conformance case id",
            field="id",
            value=id,
        )

    def register(func: F) -> F:
        known = PROGRAMS.get(id)
        if known is not None and known.func.__qualname__ != func.__qualname__:
            raise ValidationError(f"duplicate program id {id}", field="id", value=id)
        PROGRAMS[id] = Program(id, title, func)
        return func

    return register
