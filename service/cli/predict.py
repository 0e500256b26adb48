"""``featurebudget predict FILE --model M --out OUT``: score a libsvm, JSON-lines or Parquet
file against a model through ``POST /predict``, ``--batch-size`` examples per request, the
next chunk read while a request is answered; predictions appended to OUT (JSON lines or
CSV) a chunk at a time, in the file's order. Memory: about concurrency + 2 chunks;
time: O(file).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from service.cli.predict_input import PredictError, iter_rows
from service.cli.predict_output import Output, columns, output_format


def predict_file(path: str, model: str, out: str, *, url: str = "http://127.0.0.1:8000",
                 api_key: str | None = None, fmt: str = "auto", out_format: str | None = None,
                 batch_size: int = 1000, skip: int = 0, resume: bool = False,
                 overwrite: bool = False, computed_groups: list[str] | None = None,
                 max_cost: float | None = None, progress: bool = True, http=None,
                 concurrency: int = 2) -> dict:
    """Score ``path`` with ``model`` into ``out`` (the first ``skip`` examples left out;
    ``resume``: after the output's last record; ``concurrency`` requests in flight).
    Returns counts; PredictError otherwise."""
    from clients.loader import Progress

    if batch_size < 1 or skip < 0 or concurrency < 1:
        raise PredictError("--batch-size and --concurrency must be at least 1 and --skip at "
                           "least 0", status=2)
    if resume and (skip or overwrite):
        raise PredictError("--resume takes its place from the output: give it without "
                           "--skip and --overwrite", status=2)
    try:
        total = os.path.getsize(path)
    except OSError as exc:
        raise PredictError(f"cannot read {path}: {exc.strerror or exc}", status=2) from None
    with _Scorer(path, model, url, api_key, http, computed_groups, max_cost) as scorer:
        output = Output(out, output_format(out, out_format),
                        columns(scorer.info.is_batch, scorer.info.task == "classification"))
        done = output.open(resume=resume, overwrite=overwrite)
        skip = done if resume else skip
        bar = Progress(total, enabled=progress, label="predicting ")
        try:
            return _score(scorer, output, bar, fmt, batch_size, skip, out, concurrency)
        except PredictError:
            bar.end()  # the message on a line of its own
            raise
        finally:
            output.close()


def _score(scorer, output: Output, bar, fmt: str, batch_size: int, skip: int,
           out: str, concurrency: int) -> dict:
    """Chunks read ahead, up to ``concurrency`` requests in flight, records written in
    the file's order."""
    started = time.perf_counter()
    scored, last = 0, skip
    try:
        with ThreadPoolExecutor(concurrency) as requests:
            pending: deque = deque()  # (rows, future of its records), in file order
            reader = _ahead(iter_rows(scorer.path, fmt, scorer.info, batch_size, skip))
            while True:
                try:
                    rows = next(reader, None)
                except (PredictError, OSError):  # a line of the file: the chunks before
                    while pending:               # it are written first
                        last, scored = _write(output, bar, *pending.popleft(), scored)
                    raise
                if rows is None:
                    break
                pending.append((rows, requests.submit(scorer.records, rows)))
                if len(pending) >= concurrency:
                    last, scored = _write(output, bar, *pending.popleft(), scored)
            while pending:
                last, scored = _write(output, bar, *pending.popleft(), scored)
    except PredictError as exc:
        raise PredictError(f"{exc}; {_resume(scorer.path, out, last)}",
                           status=exc.status) from None
    except OSError as exc:  # the file, read while scoring
        raise PredictError(f"cannot read {scorer.path}: {exc.strerror or exc}; "
                           f"{_resume(scorer.path, out, last)}", status=2) from None
    bar.update(bar.total, scored, final=True)
    seconds = time.perf_counter() - started
    return {"model": scorer.model, "examples": scored, "skipped": skip, "out": out,
            "seconds": round(seconds, 3), "examples_per_second": round(scored / seconds, 1)
            if seconds > 0 else None}


def _write(output: Output, bar, rows, future, scored: int) -> tuple[int, int]:
    """Append the records of ``rows`` once answered; (examples through them, scored)."""
    records = future.result()
    output.write(records)
    bar.update(rows.consumed, scored + len(records))
    return rows.start + len(records), scored + len(records)


def _ahead(iterator):
    """``iterator``'s items, the next one computed on a thread while the caller works."""
    with ThreadPoolExecutor(1) as reader:
        pending = reader.submit(next, iterator, None)
        while True:
            item = pending.result()
            if item is None:
                return
            pending = reader.submit(next, iterator, None)
            yield item


def _resume(path: str, out: str, last: int) -> str:
    if not last:
        return f"no prediction was written to {out}"
    return (f"the predictions of the first {last:,} examples of {path} are in {out}: once "
            "the cause is fixed, run the same command with --resume to go on after them")


class _Scorer:
    """Chunks of examples scored by ``POST /predict`` of
    :class:`~clients.http.FeaturebudgetClient` as output records."""

    def __init__(self, path, model, url, api_key, http, computed_groups, max_cost) -> None:
        from clients.http import FeaturebudgetClient

        self.path, self.model, self.url = path, model, url
        self.computed_groups, self.max_cost = computed_groups, max_cost
        self.client = FeaturebudgetClient(url, api_key=api_key, http=http)

    def __enter__(self):
        try:
            self.info = self._call(lambda: self.client.get_model(self.model))
            if not self.info.is_batch and (self.computed_groups is not None or
                                           self.max_cost is not None):
                raise PredictError(f"--computed-groups and --max-cost are for batch models; "
                                   f"{self.model!r} is an online model", status=2)
        except PredictError:
            self.client.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def _call(self, request, rows=None):
        import httpx

        from clients.http import ServiceError

        try:
            return request()
        except ServiceError as exc:
            raise self._refused(exc, rows) from None
        except httpx.HTTPError as exc:
            raise PredictError(f"cannot reach {self.url} (--url or FEATUREBUDGET_URL): "
                               f"{exc}", status=1) from None

    def _refused(self, exc, rows) -> PredictError:
        errors = exc.problem.get("errors") or []
        if exc.status == 404:
            return PredictError(f"no model named {self.model!r} at {self.url} (`featurebudget "
                                "models list` lists them)", status=1)
        if exc.status == 422 and errors:
            error = errors[0]
            where = [self.path]
            if rows is not None and "item" in error:
                where.append(rows.where(int(error["item"])))
            elif error.get("field") in ("computed_groups", "max_cost"):
                where = ["--" + error["field"].replace("_", "-")]
            if error.get("field") and error.get("field") not in ("computed_groups",
                                                                 "max_cost"):
                where.append(f"field {error['field']!r}")
            return PredictError(", ".join(where) + f": {error.get('message', '')}", status=2)
        status = 2 if exc.status in (413, 415) else 1
        return PredictError(f"{self.url} answered {exc}", status=status)

    def records(self, rows) -> list[dict]:
        """One record per example of ``rows``: its place in the file and its answer."""
        body: dict = {"examples": rows.examples}
        if self.computed_groups is not None:
            body["computed_groups"] = self.computed_groups
        if self.max_cost is not None:
            body["max_cost"] = self.max_cost
        answer = self._call(lambda: self._predict(body), rows)
        if not self.info.is_batch:
            return [{"example": rows.start + k + 1, "score": score, "label": label}
                    for k, (score, label) in enumerate(zip(answer["scores"],
                                                           answer["labels"], strict=True))]
        keys = ("prediction", "label", "probability", "cost", "groups_used", "next_group")
        return [{"example": rows.start + k + 1, **{key: a[key] for key in keys if key in a}}
                for k, a in enumerate(answer["answers"])]

    def _predict(self, body: dict) -> dict:
        """``POST /predict`` of ``body`` on the client's connection, encoded by orjson (a
        chunk of 1,000 libsvm rows in 5 ms, where ``json.dumps`` took 70); ServiceError
        for a problem answer."""
        import orjson

        from featurebudget_client.bodies import check

        response = self.client.http.post(f"/v1/models/{self.model}/predict",
                                         content=orjson.dumps(body),
                                         headers={"Content-Type": "application/json"})
        return orjson.loads(check(response).content)


# ---------------------------------------------------------------------- the command
def _predict(args: argparse.Namespace) -> int:
    groups = None if args.computed_groups is None else \
        [g for g in args.computed_groups.split(",") if g]
    try:
        result = predict_file(args.file, args.model, args.out, url=args.url,
                              api_key=args.api_key, fmt=args.format,
                              out_format=args.out_format, batch_size=args.batch_size,
                              skip=args.skip, resume=args.resume, overwrite=args.overwrite,
                              computed_groups=groups, max_cost=args.max_cost,
                              progress=not args.quiet, concurrency=args.concurrency)
    except PredictError as exc:
        print(f"featurebudget predict: {exc}", file=sys.stderr)
        return exc.status
    print(json.dumps(result))
    return 0


_EXAMPLES = """examples:
  featurebudget predict test.svm --model spam --out scores.jsonl
  featurebudget predict rows.jsonl --model house --out house.csv      # groups per row
  featurebudget predict rows.parquet --model house --out house.csv --computed-groups size
  featurebudget predict test.svm --model spam --out scores.jsonl --resume  # go on

One record per example, in the file's order: "example" (its 1-based place among the file's
examples; a Parquet row number), then an online model's "score" and "label", or a batch
model's "prediction" ("label" and "probability" for classification), "cost", "groups_used"
and "next_group" (CSV: groups joined by ';', the next group's name). Without
--computed-groups or --max-cost each row is answered for the groups it carries. An OUT that
already holds predictions is left alone unless --resume (go on after its last complete
record, dropping a line cut short) or --overwrite (start again). Errors name the file's own
line (Parquet: row), exit status 2 for the files, 1 for the service, and say how many
predictions were written."""


def add_predict(commands, options: argparse.ArgumentParser) -> None:
    """``predict``."""
    command = commands.add_parser(
        "predict", parents=[options], help="score a libsvm / JSON-lines / Parquet file "
        "against a model, predictions to a file", epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Score the examples of FILE with model --model through POST /predict,\n"
                    "BATCH_SIZE per request, and write one record per example to --out.")
    command.add_argument("file", metavar="FILE",
                         help="libsvm (label index:value ...), JSON lines (one /predict "
                              "example object a line) or Parquet (columns named as features)")
    command.add_argument("--model", required=True, help="the model to score with")
    command.add_argument("--out", required=True, metavar="OUT",
                         help="the predictions file (JSON lines, or CSV for a .csv name)")
    command.add_argument("--format", choices=("auto", "libsvm", "jsonl", "parquet"),
                         default="auto", help="FILE's format (auto: .jsonl / .ndjson / .json "
                         "JSON lines, .parquet / .pq Parquet, anything else libsvm)")
    command.add_argument("--out-format", choices=("jsonl", "csv"), default=None,
                         help="OUT's format (default: csv for a .csv name, else jsonl)")
    command.add_argument("--computed-groups", metavar="G1,G2", default=None,
                         help="batch models: answer every row for exactly these groups")
    command.add_argument("--max-cost", type=float, default=None,
                         help="batch models: answer every row for the trained groups "
                              "within this cost")
    command.add_argument("--batch-size", type=int, default=1000,
                         help="examples per request (default 1000)")
    command.add_argument("--concurrency", type=int, default=2,
                         help="requests in flight (default 2; answers are written in the "
                              "file's order)")
    command.add_argument("--skip", type=int, default=0, metavar="N",
                         help="leave out the file's first N examples")
    command.add_argument("--resume", action="store_true",
                         help="go on after the last prediction already in OUT")
    command.add_argument("--overwrite", action="store_true",
                         help="start OUT again when it already holds predictions")
    command.add_argument("--quiet", action="store_true", help="no progress bar")
    command.set_defaults(handler=_predict)
