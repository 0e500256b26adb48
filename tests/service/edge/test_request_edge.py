"""Predictions answered without the router (``service.api.edge``) are the route's.

The same requests go to an app whose :class:`RequestEdge` takes the short path and to one
whose edge leaves predictions to the route; status, headers that matter and body must be
the same, errors included, and the first app must have answered every one of them on the
short path.
"""

from __future__ import annotations

import orjson
import pytest
from fastapi.testclient import TestClient

from service.api import edge
from service.api.edge import RequestEdge, model_of
from service.app import create_app
from tests.service.edge.test_api import GOOD
from tests.support.online import create

VIEWER, ADMIN = {"X-API-Key": "viewer"}, {"X-API-Key": "admin"}
REQUESTS = [  # (path, body bytes or None, headers)
    ("/v1/models/m/predict", orjson.dumps({"examples": [GOOD, GOOD]}), VIEWER),
    ("/v1/models/m/predict", orjson.dumps({"examples": [GOOD]}), ADMIN),
    ("/v1/models/m/predict", orjson.dumps({"examples": [GOOD]}), {}),
    ("/v1/models/m/predict", orjson.dumps({"examples": [GOOD]}), {"X-API-Key": "wrong"}),
    ("/v1/models/m/predict", orjson.dumps({"examples": [GOOD]}),
     {"Authorization": "Bearer viewer"}),
    ("/v1/models/m/predict", b"{not json", VIEWER),
    ("/v1/models/m/predict", b"[1, 2]", VIEWER),
    ("/v1/models/m/predict", orjson.dumps({"examples": "x"}), VIEWER),
    ("/v1/models/m/predict", orjson.dumps({"examples": [{"indices": [99], "values": [1]}]}),
     VIEWER),
    ("/v1/models/m/predict", orjson.dumps({"examples": [GOOD], "return_prediction_ids": 1}),
     VIEWER),
    ("/v1/models/m/predict", b"x" * 5000, VIEWER),  # over the body limit
    ("/v1/models/nope/predict", orjson.dumps({"examples": [GOOD]}), VIEWER),
    ("/v1/models/m/predict/", orjson.dumps({"examples": [GOOD]}), VIEWER),  # the router's
]


def _answers(make_settings, tmp_path, name: str, short_path: bool) -> list[tuple]:
    settings = make_settings(api_keys="admin, viewer:read", max_body_bytes=4096,
                             data_dir=tmp_path / name)
    app = create_app(settings)
    if not short_path:
        for m in app.user_middleware:
            if m.cls is RequestEdge:
                m.kwargs["short_predict"] = False
    out = []
    with TestClient(app) as client:
        client.headers.update(ADMIN)
        create(client, n_features=10)
        client.post("/v1/models/m/examples?wait=true",
                    json={"examples": [GOOD, {**GOOD, "label": -1}]}).raise_for_status()
        client.headers.pop("X-API-Key")
        for path, body, headers in REQUESTS:
            answer = client.post(path, content=body, headers={
                "content-type": "application/json", **headers})
            kept = {k: answer.headers.get(k) for k in ("content-type", "www-authenticate",
                                                       "retry-after")}
            try:
                document = answer.json()
                for varies in ("prediction_ids", "log_position"):  # (ids, stream times)
                    document.pop(varies, None)
            except ValueError:
                document = answer.text
            out.append((path, answer.status_code, kept, document))
        client.delete("/v1/models/m", headers=ADMIN)  # (Redis: the next app's store too)
    return out


def test_the_short_path_answers_what_the_route_answers(make_settings, tmp_path, monkeypatch):
    taken = []
    original = edge.predict_response

    async def counted(request, manager, settings, model):
        taken.append(model)
        return await original(request, manager, settings, model)

    monkeypatch.setattr(edge, "predict_response", counted)
    short = _answers(make_settings, tmp_path, "short", True)
    routed = _answers(make_settings, tmp_path, "routed", False)
    assert short == routed
    statuses = [status for _, status, _, _ in short]
    assert statuses[:5] == [200, 200, 401, 401, 200] and 404 in statuses and 413 in statuses
    # every request to a predict path with a valid key went the short way
    assert len(taken) == sum(1 for path, _, headers in REQUESTS
                             if model_of(path) and headers.get("X-API-Key", "v") != "wrong"
                             and headers)


@pytest.mark.parametrize(("path", "name"), [
    ("/v1/models/a/predict", "a"), ("/v1/models//predict", None),
    ("/v1/models/a/b/predict", None), ("/v1/models/predict", None),
    ("/v1/models/a/predict/", None), ("/v1/models/a/predictx", None),
    ("/v2/models/a/predict", None)])
def test_only_the_predict_path_of_one_model_is_matched(path, name):
    assert model_of(path) == name
