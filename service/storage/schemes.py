"""The storage scheme table: the scheme of ``FEATUREBUDGET_STORAGE_URL`` names the backend.

One row per scheme: what it means, and the factory that opens that backend from the URL and
the settings, named "module:function" and imported when used (a local service never imports
redis-py; the backends may read the settings without an import circle). Adding a backend
is a ``Storage`` subclass and one row here (docs/architecture.md, "Adding a storage
backend"). Looking a URL up is O(1); :func:`check` fails on a scheme not in the table with a
message listing the table.
"""

from __future__ import annotations

import importlib
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from service.storage.base import Storage


@dataclass(frozen=True)
class Scheme:
    form: str  # the URL's form, for messages and docs
    meaning: str
    factory: str  # "module:function", called as function(url, settings) -> Storage
    check: str | None = None  # "module:function" raising ValueError on a malformed URL
    redis: bool = False  # clients and chores may reach it with redis-py (settings.redis_url)


_REDIS = "service.storage.redis:open_url"
_REDIS_CHECK = "service.storage.schemes:check_redis"

SCHEMES: dict[str, Scheme] = {
    "file": Scheme("file://<dir>", "embedded backend: files in <dir> (one process)",
                   "service.storage.local:open_url"),
    "redis": Scheme("redis://[user:password@]host:port/<db>", "one Redis server",
                    _REDIS, _REDIS_CHECK, True),
    "rediss": Scheme("rediss://...", "one Redis server, over TLS", _REDIS, _REDIS_CHECK, True),
    "unix": Scheme("unix:///path/redis.sock[?db=<db>]", "one Redis server, on a Unix socket",
                   _REDIS, _REDIS_CHECK, True),
    "redis+cluster": Scheme("redis+cluster://[user:password@]host:port[,host:port...]/",
                            "a Redis Cluster", _REDIS, _REDIS_CHECK, True),
    "rediss+cluster": Scheme("rediss+cluster://...", "a Redis Cluster, over TLS",
                             _REDIS, _REDIS_CHECK, True),
    "redis+sentinel": Scheme(
        "redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/<db>]",
        "the Redis master that Redis Sentinels watch (followed through a failover)",
        _REDIS, _REDIS_CHECK, True),
}


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case ('' when it has none)."""
    scheme, sep, _ = url.partition("://")
    return scheme.lower() if sep else ""


def is_redis(url: str | None) -> bool:
    """Whether ``url`` names a Redis backend (one server, a cluster, sentinels)."""
    row = SCHEMES.get(scheme_of(url or ""))
    return row is not None and row.redis


def _load(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


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
        _load(row.check)(url)
    return url


def open_storage(url: str, settings) -> Storage:
    """The backend ``url`` names, configured by ``settings`` (not opened yet)."""
    return _load(lookup(url).factory)(url, settings)


def file_path(url: str) -> Path:
    """``file://<dir>`` -> ``<dir>`` (``file:///srv/data`` -> ``/srv/data``, ``file://data``
    -> ``data``, relative to the working directory)."""
    return Path(urllib.parse.unquote(url.partition("://")[2]))


def check_redis(url: str) -> None:
    from service import wire

    wire.cluster_url(url)  # malformed cluster or sentinel URLs raise here
    wire.sentinel_url(url)


def redis_url_in_env(environ=None) -> str | None:
    """The Redis URL that ``FEATUREBUDGET_STORAGE_URL`` (or its alias
    ``FEATUREBUDGET_REDIS_URL``) names in the environment; None for another backend or none.
    For commands that decide before the settings are read."""
    import os

    environ = os.environ if environ is None else environ
    url = environ.get("FEATUREBUDGET_STORAGE_URL") or environ.get("FEATUREBUDGET_REDIS_URL")
    return url if is_redis(url) else None


def set_url_env(url: str) -> None:
    """A command-line flag's storage URL as the setting and its alias (a flag wins over
    the environment, whichever name the environment used)."""
    import os

    os.environ["FEATUREBUDGET_STORAGE_URL"] = os.environ["FEATUREBUDGET_REDIS_URL"] = url
