"""The storage scheme table: the scheme of ``FEATUREBUDGET_STORAGE_URL`` names the backend.

One row per scheme: what it means, the factory that opens that backend from the URL and the
settings, an optional check of the URL's form, and what callers may ask before a backend
exists (``shared``: several processes may use it, as its class's ``Storage.shared`` says;
``redis``: clients and chores may reach it with redis-py). The Redis factory imports its
backend when called (a local service never imports redis-py); the backends
import neither this table nor the service's settings, so no import circle passes through it.
Adding a backend is a ``Storage`` subclass and one row here (docs/architecture.md, "Adding a
storage backend"). Looking a URL up is O(1); :func:`check` fails on a scheme not in the
table with a message listing the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from service.storage import local
from service.storage.base import Storage
from service.storage.local import file_path

__all__ = ["SCHEMES", "Scheme", "check", "file_path", "is_redis", "is_shared", "lookup",
           "open_storage", "redis_url_in_env", "scheme_of", "set_url_env"]


@dataclass(frozen=True)
class Scheme:
    form: str  # the URL's form, for messages and docs
    meaning: str
    factory: Callable[[str, object], Storage]  # factory(url, settings) -> Storage, not opened
    check: Callable[[str], None] | None = None  # raises ValueError on a malformed URL
    shared: bool = False  # several processes may share it (its class's Storage.shared)
    redis: bool = False  # clients and chores may reach it with redis-py (settings.redis_url)


def open_redis(url: str, settings) -> Storage:
    """The Redis schemes (:func:`service.storage.redis.storage.open_url`); imports redis-py."""
    from service.storage.redis.storage import open_url

    return open_url(url, settings)


def check_redis(url: str) -> None:
    """ValueError for a malformed cluster or sentinel URL."""
    from service.storage import redis_urls

    redis_urls.cluster_url(url)
    redis_urls.sentinel_url(url)


def _redis(form: str, meaning: str) -> Scheme:
    return Scheme(form, meaning, open_redis, check_redis, shared=True, redis=True)


SCHEMES: dict[str, Scheme] = {
    "file": Scheme("file://<dir>", "embedded backend: files in <dir> (one process)",
                   local.open_url),
    "redis": _redis("redis://[user:password@]host:port/<db>", "one Redis server"),
    "rediss": _redis("rediss://...", "one Redis server, over TLS"),
    "unix": _redis("unix:///path/redis.sock[?db=<db>]", "one Redis server, on a Unix socket"),
    "redis+cluster": _redis("redis+cluster://[user:password@]host:port[,host:port...]/",
                            "a Redis Cluster"),
    "rediss+cluster": _redis("rediss+cluster://...", "a Redis Cluster, over TLS"),
    "redis+sentinel": _redis(
        "redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/<db>]",
        "the Redis master that Redis Sentinels watch (followed through a failover)"),
}


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case ('' when it has none)."""
    scheme, sep, _ = url.partition("://")
    return scheme.lower() if sep else ""


def is_redis(url: str | None) -> bool:
    """Whether ``url`` names a Redis backend (one server, a cluster, sentinels)."""
    row = SCHEMES.get(scheme_of(url or ""))
    return row is not None and row.redis


def is_shared(url: str | None) -> bool:
    """Whether ``url`` names a backend several processes may share (False for a URL of no
    scheme in the table, or none)."""
    row = SCHEMES.get(scheme_of(url or ""))
    return row is not None and row.shared


def lookup(url: str) -> Scheme:
    """The table's row for ``url``; ValueError naming every scheme when it has none."""
    row = SCHEMES.get(scheme_of(url))
    if row is None:
        forms = ", ".join(s.form for s in SCHEMES.values())
        scheme = scheme_of(url)
        named = f"the scheme {scheme!r}" if scheme else "a URL without scheme://"
        raise ValueError(f"FEATUREBUDGET_STORAGE_URL has {named}, which names no storage "
                         f"backend; the schemes are: {forms}")
    return row


def check(url: str) -> str:
    """``url`` when its scheme is in the table and the backend accepts its form; else
    ValueError (at startup, from the settings)."""
    row = lookup(url)
    if row.check is not None:
        row.check(url)
    return url


def open_storage(url: str, settings) -> Storage:
    """The backend ``url`` names, configured by ``settings`` (not opened yet)."""
    return lookup(url).factory(url, settings)


def _storage_url_in_env(environ=None) -> str | None:
    import os

    environ = os.environ if environ is None else environ
    return environ.get("FEATUREBUDGET_STORAGE_URL") or environ.get("FEATUREBUDGET_REDIS_URL")


def redis_url_in_env(environ=None) -> str | None:
    """The Redis URL that ``FEATUREBUDGET_STORAGE_URL`` (or its alias
    ``FEATUREBUDGET_REDIS_URL``) names in the environment; None for another backend or none.
    For commands that decide before the settings are read."""
    url = _storage_url_in_env(environ)
    return url if is_redis(url) else None


def shared_in_env(environ=None) -> bool:
    """Whether the environment's storage URL (``FEATUREBUDGET_STORAGE_URL`` or its alias)
    names a backend several processes may share. For commands that decide before the
    settings are read."""
    return is_shared(_storage_url_in_env(environ))


def set_url_env(url: str) -> None:
    """A command-line flag's storage URL as the setting and its alias (a flag wins over
    the environment, whichever name the environment used)."""
    import os

    os.environ["FEATUREBUDGET_STORAGE_URL"] = os.environ["FEATUREBUDGET_REDIS_URL"] = url
