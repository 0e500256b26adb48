"""The Redis backend's write acknowledgement knobs, a part of the settings of their own.

:class:`service.settings.Settings` inherits them, and :class:`RedisStorage` reads them from
the environment when it is built without them, without importing the service's settings
(whose storage URL check reads the scheme table, which opens this backend: that would be an
import circle). The module sits beside the Redis package, not in it, so that the settings
never import redis-py.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class RedisWriteSettings(BaseSettings):
    """``FEATUREBUDGET_REDIS_MIN_REPLICAS`` and ``FEATUREBUDGET_REDIS_WAIT_TIMEOUT_MS``."""

    model_config = SettingsConfigDict(env_prefix="FEATUREBUDGET_", extra="ignore",
                                      hide_input_in_errors=True)

    redis_min_replicas: int = Field(
        default=0, description="Redis: acknowledge a write (the 202 of POST /examples, a "
        "created model, a prediction id...) only once `WAIT` confirms that this many replicas "
        "have it (503 with Retry-After otherwise), and fold only entries that many replicas "
        "have; 0 = acknowledged once in the master's memory, no WAIT")
    redis_wait_timeout_ms: int = Field(
        default=1000, ge=1, description="Redis: how long a write waits for "
        "REDIS_MIN_REPLICAS replicas to confirm it before the 503")

    @field_validator("redis_min_replicas")
    @classmethod
    def _min_replicas(cls, value: int) -> int:
        if value < 0:
            raise ValueError("FEATUREBUDGET_REDIS_MIN_REPLICAS is a number of Redis replicas "
                             f"(0 = no WAIT), not {value}")
        return value
