"""featurebudget-client: the HTTP client of the featurebudget service, sync
(:class:`FeaturebudgetClient`) and async (:class:`AsyncFeaturebudgetClient`).

It needs httpx only. numpy arrays, pandas DataFrames and scipy sparse matrices are taken
as examples and converted (:mod:`featurebudget_client.inputs`) without the client ever
importing numpy, pandas or scipy.
"""

from featurebudget_client.aio import AsyncFeaturebudgetClient
from featurebudget_client.answers import (
    Accepted,
    BudgetedPrediction,
    Feedback,
    Job,
    ModelInfo,
    NextStep,
    Prediction,
    Versions,
)
from featurebudget_client.errors import ModelKindError, ServiceError
from featurebudget_client.inputs import as_examples
from featurebudget_client.sync import FeaturebudgetClient

__version__ = "0.1.0"
__all__ = ["Accepted", "AsyncFeaturebudgetClient", "BudgetedPrediction", "FeaturebudgetClient",
           "Feedback", "Job", "ModelInfo", "ModelKindError", "NextStep", "Prediction",
           "ServiceError", "Versions", "as_examples"]
