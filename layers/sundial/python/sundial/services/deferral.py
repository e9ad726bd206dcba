"""Deferred sends: how a consumer Lambda hands on a DAG node it released onto a paused queue.

A consumer's role may not write a queue's state (stacks/consumers.py: its writes are bounded to
job items), so it cannot record the node for the queue's catch-up as the API functions do
(services.release, QueueStateStore.hold). Instead the node is released `queued` and `direct`
(no sweep sends it) and its first attempt gets a retry timer DEFERRED_SEND_MS ahead: an ordinary
pending item of the queue, which the sweeper sends at its time once the queue runs, or the
queue's catch-up does. Everything here is a write a consumer's
role allows: a conditional update of the node, a put of the timer.

Interleavings. The timer lies above the cursors at the pause, being more than DIRECT_WINDOW ahead.
Either way the node's message comes from the timer, at the resume or DEFERRED_SEND after the
release, whichever is later; the fence admits the queued node's first attempt. A repeat (the
parent's redelivery) writes the same timer (its key is derived from the node, attempt and time),
or, a second later, another: one more message of the attempt, which its holder rule runs once. A
node released onto a running queue is sent at once, as always.
"""

from __future__ import annotations

from collections.abc import Sequence

from sundial.clock import Clock
from sundial.model.job import Job, Status, retry_timer
from sundial.store.jobs import JobStore
from sundial.store.queue_states import QueueStateStore
from sundial.timing import DEFERRED_SEND_MS, SUBMIT_IN_FLIGHT_MS


class DeferredSends:
    def __init__(self, *, store: JobStore, queue_states: QueueStateStore, clock: Clock) -> None:
        self._store = store
        self._queue_states = queue_states
        self._clock = clock

    def paused_queues(self) -> frozenset[str]:
        """The queues paused now (one query of their states: reading them is allowed)."""
        return self._queue_states.paused()

    def sendable(self, nodes: Sequence[Job]) -> list[Job]:
        """The released nodes this runner may hand on: queued ones, and pending ones taken
        first (`direct`): a node released `pending` by an API function that died before
        recording it for its queue's catch-up (its own retry would finish it too; taking it
        here keeps it from waiting on that). A node in any other state is not ours to send."""
        ready: list[Job] = []
        now = self._clock.now_ms()
        for node in nodes:
            if node.status is Status.PENDING and not node.direct:
                taken, current = self._store.take_direct(
                    node.key, now_ms=now, stale_before_ms=now - SUBMIT_IN_FLIGHT_MS
                )
                if taken and current is not None:
                    ready.append(current)
            elif node.status is Status.QUEUED or (node.status is Status.PENDING and node.direct):
                ready.append(node)
        return ready

    def defer(self, nodes: Sequence[Job]) -> None:
        """Put a timer for each node's first attempt, DEFERRED_SEND_MS ahead."""
        now = self._clock.now_ms()
        at = now + DEFERRED_SEND_MS
        for node in nodes:
            timer = retry_timer(node, attempt=node.attempts + 1, at_ms=at)
            self._store.put_if_absent(timer, now_ms=self._clock.now_ms())
