"""The query options of a Redis URL, checked when the adapter is built.

redis-py turns every ``?name=value`` of a URL into a keyword argument of its connection
class, so an option it does not expect (``ssl_ca_certs`` on the adapters' own TLS
connection) or a bad value surfaced as an untyped ``TypeError``/``ValueError`` on first use.
Here every option is decided at construction:

- ``db`` (or the path ``/N``): the logical database, an int >= 0;
- redis-py's ``ssl_*`` options, on ``rediss://`` only, become a
  :class:`~videoflow_aio.adapters.TLSConfig`: ``ssl_ca_certs`` → ``ca_file``,
  ``ssl_certfile`` → ``cert_file``, ``ssl_keyfile`` → ``key_file``, ``ssl_password`` →
  ``key_password``, ``ssl_cert_reqs=none|optional|required`` → ``verify`` (a client checks
  the server's certificate under ``optional`` as under ``required``),
  ``ssl_check_hostname=true`` (what ``verify`` does anyway);
- everything else (``ssl_check_hostname=false`` with verification on, ``ssl_ca_path``,
  ``ssl_ciphers``, ``ssl_min_version``, timeouts, pool sizes, ``protocol``, unknown names) is
  a :class:`~videoflow_aio.contracts.errors.ValidationError` saying which argument to use.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from ...contracts.errors import ValidationError

_TLS_FILES = {"ssl_ca_certs": "ca_file", "ssl_certfile": "cert_file", "ssl_keyfile": "key_file"}
_CERT_REQS = {
    "none": False,
    "cert_none": False,
    "optional": True,
    "cert_optional": True,
    "required": True,
    "cert_required": True,
}
_TRUE = {"1", "true", "yes", "y", "on"}
_FALSE = {"0", "false", "no", "n", "off"}
_ARGUMENT = {
    "socket_timeout": "timeout=",
    "socket_connect_timeout": "timeout=",
    "timeout": "timeout=",
    "max_connections": "max_connections=",
    "protocol": "protocol=",
    "username": "username= (or the URL's user info)",
    "password": "password= (or the URL's user info)",
    "ssl": "a rediss:// URL",
}
_TLS_HINT = "pass tls=TLSConfig(…) or an ssl.SSLContext instead"


def _refuse(message: str, name: str, value: Any) -> ValidationError:
    if "password" in name:
        value = "<redacted>"  # a secret never travels in an error
    return ValidationError(message, field=f"url?{name}", value=value)


def _flag(name: str, value: str) -> bool:
    low = value.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise _refuse(f"url option {name} must be true or false, got {value!r}", name, value)


def _db(text: str, where: str) -> int:
    if not text.isdigit() or not text.isascii():
        raise _refuse(
            f"the database in the URL ({where}) must be an int >= 0, got {text!r}", "db", text
        )
    return int(text)


def url_options(url: str) -> tuple[str, dict[str, Any]]:
    """``(URL without query, its database as the path, TLSConfig fields from ssl_*)``.

    ``url`` is a ``redis://`` / ``rediss://`` URL without user info. Raises
    :class:`ValidationError` for an option that is not taken (see the module docstring)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    db: int | None = None
    path = unquote(parts.path).strip("/")
    if path:
        db = _db(path, "path")
    tls: dict[str, Any] = {}
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise _refuse("the URL's query is malformed", "query", parts.query) from None
    seen: set[str] = set()
    for name, value in pairs:
        if name in seen:
            raise _refuse(f"url option {name} given twice", name, value)
        seen.add(name)
        if name == "db":
            if db is not None:
                raise _refuse("the database is given both as the path and as ?db=", name, value)
            db = _db(value, "?db=")
        elif name.startswith("ssl_"):
            if scheme != "rediss":
                raise _refuse(
                    f"url option {name} needs a rediss:// URL (TLS); {_TLS_HINT}", name, value
                )
            _tls_option(tls, name, value)
        elif name in _ARGUMENT:
            raise _refuse(
                f"url option {name} is not taken: use {_ARGUMENT[name]}",
                name,
                value,
            )
        else:
            raise _refuse(
                f"unknown url option {name!r} (the URL takes db and redis-py's ssl_* TLS options)",
                name,
                value,
            )
    if tls.get("verify") is not False and tls.pop("check_hostname", True) is False:
        raise _refuse(
            "ssl_check_hostname=false with the certificate verified is not offered: the "
            "server's name is always checked when its certificate is; name the expected one "
            f"with TLSConfig(server_hostname=…), or {_TLS_HINT}",
            "ssl_check_hostname",
            "false",
        )
    tls.pop("check_hostname", None)
    netloc = parts.netloc
    clean = urlunsplit((parts.scheme, netloc, "" if db is None else f"/{db}", "", ""))
    return clean, tls


def _tls_option(tls: dict[str, Any], name: str, value: str) -> None:
    if name in _TLS_FILES:
        if not value:
            raise _refuse(f"url option {name} must name a file", name, value)
        tls[_TLS_FILES[name]] = value
    elif name == "ssl_password":
        if not value:
            raise _refuse("url option ssl_password is empty", name, "<redacted>")
        tls["key_password"] = value
    elif name == "ssl_cert_reqs":
        verify = _CERT_REQS.get(value.strip().lower())
        if verify is None:
            raise _refuse(
                f"url option ssl_cert_reqs must be none, optional or required, got {value!r}",
                name,
                value,
            )
        tls["verify"] = verify
    elif name == "ssl_check_hostname":
        tls["check_hostname"] = _flag(name, value)
    else:
        raise _refuse(f"url option {name} is not offered; {_TLS_HINT}", name, value)
