"""Models created through :class:`clients.FeaturebudgetClient` from a creation body (the
dicts the tests and load tests keep: ``{"name", "algorithm", ...}``, with ``groups`` for a
batch model)."""

from __future__ import annotations

import contextlib

from clients import FeaturebudgetClient, ModelInfo, ServiceError


def create_from_body(client: FeaturebudgetClient, body: dict, *,
                     replace: bool = False) -> ModelInfo:
    """Create the model ``body`` describes; ``replace``: delete one of that name first."""
    if replace:
        with contextlib.suppress(ServiceError):  # none of that name yet
            client.delete_model(body["name"])
    if "groups" in body:
        return client.create_batch_model(body["name"], algorithm=body["algorithm"],
                                         groups=body["groups"],
                                         task=body.get("task", "regression"),
                                         params=body.get("params"))
    return client.create_model(body["name"], algorithm=body["algorithm"],
                               n_features=body.get("n_features"),
                               hash_bits=body.get("hash_bits"), budget=body.get("budget"),
                               params=body.get("params"),
                               libsvm_zero_based=body.get("libsvm_zero_based", False))
