"""The cooperative scheduler: actors on threads of their own, one running at a time, each
handing control back before every AWS call (tests.simulation.sim's docstring)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any


class Crash(BaseException):
    """The Lambda (or the client) dies here. A BaseException, so no `except Exception` in the
    code under test (Powertools' batch processor included) can swallow it."""


# -- the cooperative scheduler ----------------------------------------------------------------


class Actor:
    def __init__(self, name: str, work: Callable[[], None]) -> None:
        self.name = name
        self.work = work
        self.done = False
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        # Waiting for the clock to reach this time (Scheduler.wait_until); None: ready.
        self.wake_at: int | None = None


class Scheduler:
    """Runs actors one at a time; an actor gives control back at each AWS call.

    An actor may also wait for the clock (`wait_until`: a job function that runs for minutes,
    a worker between heartbeats). The clock stands still while actors run, so `run` returns
    once every actor is done or waits for a time still ahead, with those waiting: the caller
    advances the clock and hands them to the next `run`, among that tick's new actors. An
    actor that never waits is picked exactly as before (the choice is among the ready ones,
    which are then all the live ones)."""

    def __init__(
        self, rng: random.Random, trace: Callable[[str], None], now: Callable[[], int]
    ) -> None:
        self._rng = rng
        self._trace = trace
        self._now = now
        self._cv = threading.Condition()
        self._turn: Actor | None = None
        self._local = threading.local()

    def current(self) -> Actor | None:
        return getattr(self._local, "actor", None)

    def run(self, actors: list[Actor]) -> list[Actor]:
        """Run `actors` (new ones, or ones a previous run returned waiting) until each is done
        or waits for a time ahead of the clock; returns those waiting, in their order."""
        for actor in actors:
            if actor.thread is None:
                actor.thread = threading.Thread(target=self._body, args=(actor,), daemon=True)
                actor.thread.start()
        live = list(actors)
        while live:
            now = self._now()
            ready = [a for a in live if a.wake_at is None or a.wake_at <= now]
            if not ready:
                return live
            actor = self._rng.choice(ready)
            actor.wake_at = None
            with self._cv:
                self._turn = actor
                self._cv.notify_all()
                self._cv.wait_for(lambda: self._turn is None)
            if actor.done:
                live.remove(actor)
                assert actor.thread is not None
                actor.thread.join()
        return []

    def wait_until(self, at_ms: int) -> None:
        """Called on an actor's thread: give control back until the clock reaches `at_ms`
        (a later `run`, once the caller advanced the clock)."""
        actor = self.current()
        assert actor is not None, "only an actor waits for the clock"
        if at_ms <= self._now():
            return
        actor.wake_at = at_ms
        self.pause_point()

    def pause_point(self) -> None:
        """Called on an actor's thread before each AWS call: let the scheduler pick again."""
        actor = self.current()
        if actor is None:
            return
        with self._cv:
            self._turn = None
            self._cv.notify_all()
            self._cv.wait_for(lambda: self._turn is actor)

    def _body(self, actor: Actor) -> None:
        self._local.actor = actor
        with self._cv:
            self._cv.wait_for(lambda: self._turn is actor)
        try:
            actor.work()
        except Crash as crash:
            self._trace(f"  {actor.name}: CRASHED ({crash})")
            actor.error = crash
        except BaseException as error:
            self._trace(f"  {actor.name}: failed with {type(error).__name__}: {error}")
            actor.error = error
        finally:
            with self._cv:
                actor.done = True
                self._turn = None
                self._cv.notify_all()


class InlineExecutor(Executor):
    """Runs each submitted call at once, on the caller's thread (see the module docstring)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Crash:
            raise
        except BaseException as error:
            future.set_exception(error)
        return future

    def __init__(self, *_: Any, **__: Any) -> None:
        super().__init__()

    def __enter__(self) -> InlineExecutor:
        return self
