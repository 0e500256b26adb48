"""The service's tests against the real app, grouped by concern: ``edge/`` (what a request
meets: validation, errors, the OpenAPI document, the predict path, the CLI), ``online/``
(the online kind: acknowledgement, crashes, snapshots, read-your-writes), ``batch/`` (batch
families, retrains, budgeted answers, next group, pages), ``storage/`` (the backends,
Redis streams, cluster, fail-over, placement) and ``operations/`` (metrics, alerts,
dashboards, images, start-up and shutdown). ``conftest.py`` serves every folder."""
