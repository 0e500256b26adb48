"""The online kind: every example is learned as it is folded.

``models`` (:class:`~service.online.models.OnlineModels`: the process's online models and
what the routes ask of them), ``host`` (one model's learner, log position and snapshots),
``fold`` (its fold: parse, apply, serving view) and ``view`` (what a process that does not
fold a model needs to answer for it). The batch kind is :mod:`service.batch`.
"""
