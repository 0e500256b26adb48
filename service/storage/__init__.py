"""Storage backends, chosen by the scheme of the storage URL (:mod:`service.storage.schemes`):
embedded local files (``file://``, the default) or Redis (``redis://`` and its kin)."""

from __future__ import annotations

from service.storage.base import LogEntry, LogReader, ModelChangedError, Storage, id_key


def make_storage(settings) -> Storage:
    """The backend of ``settings.storage_location``, looked up in the scheme table; O(1)."""
    from service.storage import schemes

    return schemes.open_storage(settings.storage_location, settings)


__all__ = ["LogEntry", "LogReader", "ModelChangedError", "Storage", "id_key", "make_storage"]
