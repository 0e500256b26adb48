"""Warm budgeted answers run inline on the event loop; cold, new-version and unknown-cost
ones on the answer pool (service/answers.py)."""

from __future__ import annotations

import asyncio
import contextlib
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


def test_cold_answers_of_a_cheap_model_run_inline_until_several_are_slow():
    """A class (function, model, kind of estimator, examples) whose last CLASS_WINDOW calls
    (CLASS_EVIDENCE at least) were cheap (but for a few outliers) answers never-seen sets on
    the loop; refused calls do not count; more slow calls send the class back to the pool; a
    new version keeps the evidence unless it holds another kind of estimator."""
    from service.answers import CLASS_EVIDENCE, CLASS_WINDOW, COLD_OUTLIERS

    class Host:
        served = object()

    host = Host()
    pool = AnswerPool(threads=1)
    threads = []

    def answer(host, document):
        threads.append(threading.current_thread().name)
        if document.get("computed_groups") == ["slow"]:
            deadline = time.thread_time() + 0.01
            while time.thread_time() < deadline:
                pass
        if document.get("computed_groups") == ["bad"]:
            raise ValueError("refused")
        return document

    def cold(k):  # a set never asked before
        return {"examples": [{}], "computed_groups": [f"g{k}"]}

    async def main():
        loop = threading.current_thread().name
        for _ in range(CLASS_WINDOW + 5):  # refused calls: not evidence of a cheap class
            with contextlib.suppress(ValueError):
                await pool.run(answer, host, {"examples": [{}], "computed_groups": ["bad"]})
        await pool.run(answer, host, cold(-1))
        assert threads[-1] == "answers_0"
        for k in range(CLASS_EVIDENCE - 2):
            await pool.run(answer, host, cold(k))
        assert loop not in threads  # too little evidence yet
        await pool.run(answer, host, cold(100))
        await pool.run(answer, host, cold(1000))  # enough cheap calls
        assert threads[-1] == loop
        await pool.run(answer, host, {"examples": [{}], "computed_groups": ["slow"]})
        assert threads[-1] == loop  # (the class was cheap: it ran inline, and was slow)
        await pool.run(answer, host, cold(1001))
        assert threads[-1] == loop  # a few outliers in the window are tolerated
        for _ in range(COLD_OUTLIERS):
            await pool.run(answer, host, {"examples": [{}], "computed_groups": ["slow"]})
        await pool.run(answer, host, cold(1002))
        assert threads[-1] == "answers_0"  # more: back to the pool
        await pool.run(answer, host, {"examples": [{}, {}], "computed_groups": ["x"]})
        assert threads[-1] == "answers_0"  # another number of examples: another class
        for k in range(CLASS_WINDOW):
            await pool.run(answer, host, cold(2000 + k))
        assert threads[-1] == loop  # cheap again
        Host.served = object()  # a new version of the same kind of estimator: still cheap
        await pool.run(answer, host, cold(3000))
        assert threads[-1] == loop
        Host.served = 1.5  # another kind of estimator: starts over
        await pool.run(answer, host, cold(3001))
        assert threads[-1] == "answers_0"

    asyncio.run(main())
    pool.close()


def test_a_hosts_own_answer_method_is_measured_like_a_function_of_the_host():
    """The hosts hand the pool their bound methods (``host.answer_predict``): the host is
    the method's ``__self__``, so a cheap known shape is answered inline as before."""
    class Host:
        served = object()

        def answer(self, document):
            return threading.current_thread().name

    host, pool = Host(), AnswerPool(threads=1)

    async def main():
        loop = threading.current_thread().name
        cheap = {"examples": [{}], "computed_groups": ["a"]}
        seen = [await pool.run(host.answer, cheap) for _ in range(3)]
        assert seen == ["answers_0", loop, loop]

    asyncio.run(main())
    assert pool.inline == 2
    pool.close()
