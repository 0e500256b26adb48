"""Storage backends: embedded local files (default) or Redis."""

from __future__ import annotations

from service.storage.base import LogEntry, LogReader, Storage, id_key


def make_storage(settings) -> Storage:
    """The backend the settings ask for: Redis when ``redis_url`` is set (a Redis Cluster
    for ``redis+cluster://host:port[,host:port...]/``, one watched by Sentinel for
    ``redis+sentinel://``), else local."""
    if settings.redis_url:
        from service.storage.redis import RedisStorage

        return RedisStorage(settings.redis_url,
                            autoclaim_idle_ms=settings.autoclaim_idle_ms,
                            deadletter_maxlen=settings.deadletter_maxlen,
                            min_replicas=settings.redis_min_replicas,
                            wait_timeout_ms=settings.redis_wait_timeout_ms,
                            chunk_bytes=settings.redis_chunk_bytes)
    from service.storage.local import LocalStorage

    return LocalStorage(settings.data_dir, segment_bytes=settings.log_segment_bytes,
                        fsync=settings.fsync)


__all__ = ["LogEntry", "LogReader", "Storage", "id_key", "make_storage"]
