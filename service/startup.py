"""Start-up lines of the service's processes: :func:`mask_url` (a URL without its password,
as the Redis backend's ``Storage.description`` shows it) and :func:`model_summary` (the
models restored).

Compiling the kernels ahead (``featurebudget warmup``) is :mod:`service.warmup`.
"""

from __future__ import annotations

import logging
import urllib.parse

log = logging.getLogger("featurebudget")

_SECRET_QUERY = ("password", "pass", "pwd")


def mask_url(url: str) -> str:
    """``url`` with its password, in the user info or in the query, shown as ``***``."""
    parts = urllib.parse.urlsplit(url)
    masked = url
    if parts.password is not None:
        userinfo, _, host = parts.netloc.rpartition("@")
        masked = masked.replace(parts.netloc, f"{userinfo.partition(':')[0]}:***@{host}", 1)
    if parts.query:
        pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if any(k.lower() in _SECRET_QUERY for k, _ in pairs):
            query = "&".join(f"{k}=***" if k.lower() in _SECRET_QUERY else
                             f"{k}={urllib.parse.quote(v, safe='')}" for k, v in pairs)
            masked = masked.replace(f"?{parts.query}", f"?{query}", 1)
    return masked


def model_summary(online: list[str], batch: list[str], failed: list[str],
                  shown: int = 10) -> str:
    """``3 models restored (2 online: a, b; 1 batch: c)``, names cut after ``shown``."""
    def names(items: list[str]) -> str:
        items = sorted(items)
        more = f", ... {len(items) - shown} more" if len(items) > shown else ""
        return ", ".join(items[:shown]) + more

    total = len(online) + len(batch)
    parts = [f"{len(online)} online" + (f": {names(online)}" if online else ""),
             f"{len(batch)} batch" + (f": {names(batch)}" if batch else "")]
    text = f"{total} model{'s' if total != 1 else ''} restored ({'; '.join(parts)})"
    if failed:
        text += f"; {len(failed)} out of service: {names(failed)}"
    return text
