"""A griffe extension: the docstrings' Sphinx roles (``:class:`~a.B` ``) read as code.

The library's docstrings name other objects the Sphinx way; mkdocstrings renders Markdown.
This turns each role into a code span of the name it shows (``B`` for ``~a.B``, ``a.B``
otherwise), so the reference reads cleanly. Links that must resolve are written in the
mkdocstrings form ``[`B`][a.B]``, which the strict build checks.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|attr|mod|exc|obj|const):`(~?)\.?([^`]+)`")


def _shown(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_shown, obj.docstring.value)
