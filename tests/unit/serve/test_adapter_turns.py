"""The batch answers for one adapter at a time (serve/adapters.py): requests for the adapter in use
join at once, one for another adapter waits until the batch is empty, and requests that arrive
after it wait behind it (no adapter starves another)."""

from __future__ import annotations

import asyncio

from clustertune.serve.adapters import BASE, Turns


def test_adapters_take_turns_in_arrival_order_and_share_the_batch_within_one() -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        switched: list[str] = []
        entered: list[str] = []
        turns = Turns(switched.append)
        release = {name: asyncio.Event() for name in ("a1", "a2", "b1", "a3", "base1")}

        async def request(name: str, key: str) -> None:
            async with turns.turn(key):
                entered.append(name)
                await release[name].wait()

        async def settle() -> None:  # every task that can move has moved (no switch under way)
            for _ in range(20):
                await asyncio.sleep(0)

        async def until(done: object) -> None:  # a switch runs in a thread: wait for its request
            for _ in range(2000):
                if done():  # type: ignore[operator]
                    return
                await asyncio.sleep(0.005)
            raise AssertionError(f"still waiting: entered {entered}, switched {switched}")

        tasks = [asyncio.create_task(request("a1", "A"))]
        await until(lambda: entered == ["a1"])
        tasks.append(asyncio.create_task(request("a2", "A")))  # the adapter in use: joins at once
        await settle()
        assert entered == ["a1", "a2"] and switched == ["A"] and turns.running == 2
        tasks.append(asyncio.create_task(request("b1", "B")))
        await settle()
        tasks.append(asyncio.create_task(request("a3", "A")))  # after b1: waits behind it
        await settle()
        assert entered == ["a1", "a2"]
        release["a1"].set()
        await settle()
        assert entered == ["a1", "a2"]  # a2 still in the batch
        release["a2"].set()
        await until(lambda: "b1" in entered)
        await settle()
        assert entered == ["a1", "a2", "b1"] and switched == ["A", "B"]
        tasks.append(asyncio.create_task(request("base1", BASE)))
        release["b1"].set()
        await until(lambda: "a3" in entered)
        await settle()
        # a3 came before base1: A again, then the base alone.
        assert entered == ["a1", "a2", "b1", "a3"] and switched == ["A", "B", "A"]
        release["a3"].set()
        await settle()
        release["base1"].set()
        await asyncio.gather(*tasks)
        return entered, switched

    entered, switched = asyncio.run(scenario())
    assert entered == ["a1", "a2", "b1", "a3", "base1"]
    assert switched == ["A", "B", "A", BASE]


def test_a_failed_switch_fails_that_request_and_the_next_one_tries_again() -> None:
    async def scenario() -> list[str]:
        calls: list[str] = []

        def switch(key: str) -> None:
            calls.append(key)
            if len(calls) == 1:
                raise RuntimeError("adapter files unreadable")

        turns = Turns(switch)
        try:
            async with turns.turn("A"):
                raise AssertionError("admitted although the switch failed")
        except RuntimeError:
            pass
        assert turns.running == 0 and turns.active == BASE
        async with turns.turn("A"):
            assert turns.active == "A"
        return calls

    assert asyncio.run(scenario()) == ["A", "A"]
