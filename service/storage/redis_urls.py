"""The URL forms of a Redis Cluster and of Redis Sentinels, parsed: :func:`cluster_url` and
:func:`sentinel_url` (the topology connects with them; the scheme table checks a URL with
them at start-up). Pure string parsing, O(len(url)); no redis-py.
"""

from __future__ import annotations

CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}  # scheme -> TLS


def cluster_url(url: str) -> dict | None:
    """``redis+cluster://[user:password@]host:port[,host:port...][/]`` (``rediss+cluster``:
    TLS) -> ``{"nodes": [(host, port), ...], "username", "password", "ssl"}``, the startup
    nodes of a Redis Cluster; None for any other URL (a single Redis server). ValueError
    when a cluster URL is malformed (no node, a port missing, a database other than 0)."""
    import urllib.parse

    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in CLUSTER_SCHEMES:
        return None
    netloc, _, path = rest.partition("/")
    path, _, query = path.partition("?")
    if path not in ("", "0") or query:
        raise ValueError(f"a Redis Cluster URL has no database or options: {url!r}")
    userinfo, _, hosts = netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    nodes = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"a Redis Cluster URL lists host:port pairs: {url!r}")
        nodes.append((host.strip("[]"), int(port)))
    return {"nodes": nodes, "username": urllib.parse.unquote(username) or None,
            "password": urllib.parse.unquote(password) or None,
            "ssl": CLUSTER_SCHEMES[scheme.lower()]}


SENTINEL_SCHEMES = ("redis+sentinel",)
SENTINEL_FORM = "redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/<db>]"


def sentinel_url(url: str) -> dict | None:
    """``redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/<db>]`` ->
    ``{"sentinels": [(host, port), ...], "master", "db", "username", "password"}``: Redis
    Sentinels and the name of the master they watch (the credentials are the master's; the
    sentinels are reached without). None for any other URL. ValueError when a sentinel URL
    is malformed (no sentinel, a port missing, no master name, a database that is no number,
    options)."""
    import urllib.parse

    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.lower().endswith("+sentinel"):
        return None
    if scheme.lower() not in SENTINEL_SCHEMES:
        raise ValueError(f"unsupported Redis Sentinel scheme {scheme!r} (TLS is not supported); "
                         f"use {SENTINEL_FORM}")
    netloc, _, path = rest.partition("/")
    path, _, query = path.partition("?")
    if query:
        raise ValueError(f"a Redis Sentinel URL has no options: {url!r}")
    master, _, db = path.partition("/")
    master = urllib.parse.unquote(master)
    if not master:
        raise ValueError(f"a Redis Sentinel URL names the master the sentinels watch: "
                         f"{SENTINEL_FORM}, got {url!r}")
    db = db.rstrip("/")
    if db and not db.isdigit():
        raise ValueError(f"the database of a Redis Sentinel URL is a number: {url!r}")
    userinfo, _, hosts = netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    sentinels = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"a Redis Sentinel URL lists the sentinels as host:port pairs: "
                             f"{SENTINEL_FORM}, got {url!r}")
        sentinels.append((host.strip("[]"), int(port)))
    return {"sentinels": sentinels, "master": master, "db": int(db or 0),
            "username": urllib.parse.unquote(username) or None,
            "password": urllib.parse.unquote(password) or None}
