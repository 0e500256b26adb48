"""Python clients of the featurebudget service: HTTP (sync and async), the Redis stream
producer (compact binary entries) and the bulk libsvm loader."""

from clients.http import (
    Accepted,
    AsyncFeaturebudgetClient,
    FeaturebudgetClient,
    Feedback,
    ModelInfo,
    Prediction,
    ServiceError,
)
from clients.stream import StreamProducer

__all__ = ["Accepted", "AsyncFeaturebudgetClient", "FeaturebudgetClient", "Feedback",
           "ModelInfo", "Prediction", "ServiceError", "StreamProducer"]
