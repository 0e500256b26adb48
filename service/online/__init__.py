"""The online kind: every example is learned as it is folded.

``models`` (:class:`~service.online.models.OnlineModels`: the registry of the process's
online models), ``host`` (one model: its learner, log position, snapshots and every
route-facing method, with its bases ``host_reads``: the serving view and the description,
and ``host_predictions``: predictions and feedback), ``learner`` (a learner from its spec,
checked), ``snapshot`` (a snapshot file read back, checked), ``fold`` (its fold: parse,
apply, serving view) and ``view`` (what a process that does not fold a model needs to answer
for it). The batch kind is :mod:`service.batch`.
"""
