"""Warm budgeted answers run inline on the event loop; cold, new-version and unknown-cost
ones on the answer pool (service/answers.py)."""

from __future__ import annotations

import asyncio
import threading
import time

from service.answers import AnswerPool


def test_a_cheap_known_shape_is_answered_inline_and_a_slow_or_new_one_is_not():
    class Host:
        served = object()  # the version: a new one is a new shape

    host = Host()
    pool = AnswerPool(threads=1)
    threads = []

    def answer(host, document):
        threads.append(threading.current_thread().name)
        if document.get("budget") == 9.0:  # a slow (cold) answer: ~20 ms of CPU
            deadline = time.thread_time() + 0.02
            while time.thread_time() < deadline:
                pass
        return document

    async def main():
        loop = threading.current_thread().name
        cheap = {"examples": [{}], "computed_groups": ["a", "b"]}
        for _ in range(3):
            await pool.run(answer, host, cheap)
        assert threads == ["answers_0", loop, loop]  # measured on the pool, then inline
        Host.served = object()  # a new version: back to the pool once
        await pool.run(answer, host, cheap)
        assert threads[-1] != loop
        for _ in range(2):
            await pool.run(answer, host, {"examples": [{}], "budget": 9.0})
        assert threads[-2:] == ["answers_0", "answers_0"]  # slow: never inline
        for _ in range(3):  # a cost cap (max_cost) names the set too
            await pool.run(answer, host, {"examples": [{}], "max_cost": 2.5})
        assert threads[-3:] == ["answers_0", loop, loop]
        for _ in range(2):  # sets from the examples themselves: unknown cost, the pool
            await pool.run(answer, host, {"examples": [{}]})
        assert threads[-2:] == ["answers_0", "answers_0"]
        return loop

    asyncio.run(main())
    assert pool.inline == 4
    pool.close()
