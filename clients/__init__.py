"""Python clients of the featurebudget service: HTTP (sync and async; the
``featurebudget_client`` package, a distribution of its own), the Redis stream producer
(compact binary entries) and the bulk libsvm loader."""

from clients.http import (
    Accepted,
    AsyncFeaturebudgetClient,
    BudgetedPrediction,
    FeaturebudgetClient,
    Feedback,
    Job,
    ModelInfo,
    ModelKindError,
    NextStep,
    Prediction,
    ServiceError,
    Versions,
)
from clients.stream import NotReplicatedError, StreamProducer, UnknownModelError

__all__ = ["Accepted", "AsyncFeaturebudgetClient", "BudgetedPrediction", "FeaturebudgetClient",
           "Feedback", "Job", "ModelInfo", "ModelKindError", "NextStep", "NotReplicatedError",
           "Prediction", "ServiceError", "StreamProducer", "UnknownModelError", "Versions"]
