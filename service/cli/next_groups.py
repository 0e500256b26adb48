"""``featurebudget next``: which group each example should compute next (``POST /next`` with
``examples``, through the client's ``next_groups``), from a file or inline JSON."""

from __future__ import annotations

import argparse
import json
import sys

from service.cli.remote import UsageError, remote

_EXAMPLES = """examples:
  featurebudget next house --example '{"features": {"context": {"ctx": 2}}}'
  featurebudget next house examples.jsonl --max-cost 7 --exchange-rate 0.01
  featurebudget next house examples.json --computed-groups context,block_0 --json
  cat examples.jsonl | featurebudget next house -

An example is the body /predict takes ({"features": {group: {feature: value}}}); a file
holds one per line (JSON lines) or one JSON list. Without --computed-groups each example's
computed set is the groups it carries. One line per example: the group to compute next,
its cost and the expected drop of the held-out loss with its 95 % interval, and which rule
chose it (per-example or per-set); or the reason to stop. --json prints the answers."""


def read_examples(source: str | None, inline: str | None) -> list[dict]:
    """The examples of ``inline`` JSON (an object or a list) or of the file ``source``
    ('-': stdin): JSON lines or one JSON list. UsageError naming the bad line."""
    if (source is None) == (inline is None):
        raise UsageError("give a FILE of examples or --example JSON (one of the two)")
    if inline is not None:
        text, name = inline, "--example"
    elif source == "-":
        text, name = sys.stdin.read(), "stdin"
    else:
        with open(source, encoding="utf-8") as fh:
            text, name = fh.read(), source
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            items = json.loads(stripped)
        elif inline is not None:
            items = [json.loads(stripped)]
        else:
            items = []
            for number, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        items.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise UsageError(f"{name} line {number}: not JSON ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name}: not JSON ({exc})") from exc
    if not items or not all(isinstance(item, dict) for item in items):
        raise UsageError(f"{name}: needs at least one example, each a JSON object")
    return items


def describe(answer: dict) -> str:
    """One line of an answer: ``NEXT name cost C gain G [lo, hi] (policy)`` or ``STOP``."""
    where = f"({answer['policy']}{', policy building' if answer.get('policy_building') else ''})"
    nxt = answer.get("next_group")
    if nxt is None:
        return f"STOP  {answer.get('stop_reason')}  {where}"
    gain = nxt.get("expected_gain")
    interval = nxt.get("expected_gain_interval")
    text = f"NEXT  {nxt['name']}  cost {nxt['cost']:g}"
    if gain is not None:
        text += f"  gain {gain:.4g}"
        if interval is not None:
            text += f" [{interval[0]:.4g}, {interval[1]:.4g}]"
    return f"{text}  {where}"


@remote
def _next(client, args: argparse.Namespace) -> int:
    examples = read_examples(args.file, args.example)
    computed = None if args.computed_groups is None else \
        [g for g in args.computed_groups.split(",") if g]
    answers = client.next_groups(args.model, examples, computed_groups=computed,
                                 max_cost=args.max_cost, exchange_rate=args.exchange_rate)
    for answer in answers:
        print(json.dumps(answer) if args.json else describe(answer))
    return 0


def add_next(commands, options: argparse.ArgumentParser) -> None:
    """``next``."""
    parser = commands.add_parser(
        "next", parents=[options], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EXAMPLES, help="which group each example should compute next",
        description="Per example, the group of batch model MODEL to compute next from the "
                    "values it carries\n(POST /v1/models/MODEL/next with examples).")
    parser.add_argument("model", metavar="MODEL", help="the batch model's name")
    parser.add_argument("file", metavar="FILE", nargs="?", default=None,
                        help="examples as JSON lines or a JSON list ('-': stdin)")
    parser.add_argument("--example", default=None, metavar="JSON",
                        help="inline examples instead of FILE: one object or a list")
    parser.add_argument("--computed-groups", default=None, metavar="A,B",
                        help="every example's computed groups (default: those it carries)")
    parser.add_argument("--max-cost", type=float, default=None,
                        help="the cap on the total cost, computed groups included")
    parser.add_argument("--exchange-rate", type=float, default=None,
                        help="loss units per unit of cost: stop when no group pays")
    parser.add_argument("--json", action="store_true", help="print each answer as JSON")
    parser.set_defaults(handler=_next)
