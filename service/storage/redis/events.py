"""Pub/sub on Redis: a published or rolled-back version reaches every process
(``featurebudget:versions``, published by the scripts), a queued retrain job the folding
ones (``featurebudget:jobs``), a model created or deleted every process
(``featurebudget:models-changed``), a request for a snapshot now the folding one
(``featurebudget:snapshot-requests``). A subscription is one connection; each event O(1).
"""

from __future__ import annotations

from service.storage import redis_keys
from service.storage.redis.scripts import text


class EventsMixin:
    """The pub/sub half of :class:`~service.storage.redis.RedisStorage`."""

    async def version_events(self):
        async for message in self._names(redis_keys.VERSIONS_CHANNEL):
            model, _, version = message.rpartition(" ")  # "<model> <version>"
            if model and version.isdigit():
                yield model, int(version)

    async def notify_job(self, model: str) -> None:
        await self.client.publish(redis_keys.JOBS_CHANNEL, model)

    def job_events(self):
        return self._names(redis_keys.JOBS_CHANNEL)

    async def notify_models(self, model: str) -> None:
        await self.client.publish(redis_keys.MODELS_CHANNEL, model)

    def model_events(self):
        return self._names(redis_keys.MODELS_CHANNEL)

    async def request_snapshot(self, model: str) -> None:
        await self.client.publish(redis_keys.SNAPSHOTS_CHANNEL, model)

    def snapshot_requests(self):
        return self._names(redis_keys.SNAPSHOTS_CHANNEL)

    async def _names(self, channel: str):
        """The messages published on ``channel`` (text)."""
        pubsub, node_client = self.topology.pubsub(channel)
        try:
            await pubsub.subscribe(channel)
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    yield text(message["data"])
        except Exception as exc:
            if self.topology.retries(exc):  # a lost node: the next subscription elsewhere
                await self.topology.refresh()
            raise
        finally:
            await pubsub.aclose()
            if node_client is not None:
                await node_client.aclose()
