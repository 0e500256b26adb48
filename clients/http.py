"""The HTTP clients, from the ``featurebudget-client`` distribution
(``clients/featurebudget-client``, package :mod:`featurebudget_client`): the same classes
under the names this package has always had."""

from featurebudget_client import (
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

__all__ = ["Accepted", "AsyncFeaturebudgetClient", "BudgetedPrediction", "FeaturebudgetClient",
           "Feedback", "Job", "ModelInfo", "ModelKindError", "NextStep", "Prediction",
           "ServiceError", "Versions"]
