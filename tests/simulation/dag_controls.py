"""DAG controls (issue 32; `--dag-controls`): an operator's pause, resume, cancel, node cancel and
node retry racing DAG submits and the nodes' own progress, with runs that last.

- **DAGs** come more often: the `dag-submitter` submits one most ticks of the run's first half
  (the first tenant's DAG: five nodes on two queues; half of them with `on_failure: continue`,
  half with the default `cancel_descendants`; half due at once, half a minute later, so a root
  can be pending, direct or swept when a control reaches it).
- **Runs last**: a DAG node's run takes 0 to 100 s (under the consumers' visibility timeout), so
  controls meet nodes that are running, and parents finish while a pause or a cancel is on its
  way. Faults (crashes, throttles, partial batches) redeliver parents, as SQS does.
- **The DAG operator** (slot `dag-operator`), most ticks, picks a DAG: one whose submit answered,
  or, one time in three, one it found in a queue's listing (GET /dags?queue=), whose submit may
  still be running in this very tick. It then pauses it, resumes it, cancels it, cancels one of
  its nodes (DELETE /jobs/{id}: a cascade follows its policy), or retries a cancelled node by id
  (POST /jobs/{id}/retry: 409 while its parents are unfinished). Its requests go through the
  clients' rules (repeated at once or in the drain when they got no answer); each records what
  its 200 promised from inside the request, so a repeat's answer records it too.
- **The drain** resumes every DAG still paused, as an operator would.

**Oracle** (check_dag_controls, beside the main oracle's "no duplicate run without a crash",
"every node not cancelled ran" and "a node ran only after all its parents", which here lets a
node run after a parent that was cancelled and never ran, as `on_failure: continue` and a retry
by id allow):
- a node the pause's 200 showed held starts only after a resume of its DAG began (or after a
  retry by id of it was asked for);
- a node a cancel's 200 showed cancelled (the DAG's, or a node's with its cascade, read right
  after the answer) never starts after that answer unless it was retried by id (recorded with
  the main oracle's cancels: Ledger.cancelled, cancelled_after).

Interleavings this relies on are the ones services.dags and services.dag_progress name: a pause
between a submit's listing entries and its roots, a resume while a submit or an earlier resume
is in flight, a cancel while a submit writes, a retry of a node whose parents are still running,
a redelivered parent releasing children a second time.
"""

from __future__ import annotations

import random
from collections import defaultdict
from functools import partial
from typing import Any

from sundial.errors import Conflict
from sundial.model.dag import DagStatus, DagView, SubmitDag
from sundial.model.job import Status
from sundial.transport.envelope import Envelope
from sundial.wiring import Dependencies
from tests.simulation.actors import Actors
from tests.simulation.scheduler import Actor
from tests.support import DAILY_REPORT

DAG_SLOTS = ("dag-submitter", "dag-operator")
# The most a DAG node's run lasts: under the consumers' visibility timeout (a run longer than
# it is the holders profile's subject, not this one's).
MAX_NODE_RUN_MS = 100_000


class DagControls(Actors):
    dag_rng: random.Random  # the profile's own draws: the other profiles' seeds replay as they did
    # node id -> (the run count at which a pause's 200 showed it held, its DAG's id)
    held_at: dict[str, list[tuple[int, str]]]
    # DAG id -> the run counts at which a resume of it began
    resumed_at: dict[str, list[int]]

    def prepare_dag_controls(self) -> None:
        self.dag_rng = random.Random(self.config.seed * 7919 + 11)
        self.held_at = defaultdict(list)
        self.resumed_at = defaultdict(list)

    def dag_control_actors(self, tick: int) -> list[Actor]:
        actors = []
        submitting = tick < self.config.ticks // 2 and self.dag_rng.random() < 0.6
        if submitting:
            actors.append(Actor("dag-submitter:submit DAG", self.op_submit_control_dag))
        if submitting and self.dag_rng.random() < 0.5:
            # The operator watching the listing as a submit runs: the newest DAG it finds may be
            # the one being written, its roots not sent yet.
            actors.append(Actor("dag-operator:pause the newest DAG", self.op_pause_newest))
        elif self.dag_rng.random() < 0.8:
            actors.append(Actor("dag-operator:control a DAG", self.op_control_dag))
        return actors

    def op_pause_newest(self) -> None:
        listed = self._listed()
        if listed:
            self._pause_dag(listed[-1])

    def op_submit_control_dag(self) -> None:
        body: dict[str, Any] = dict(DAILY_REPORT)
        if self.dag_rng.random() < 0.5:
            body["on_failure"] = "continue"
        if self.dag_rng.random() < 0.5:
            body["delay_seconds"] = 30
        self.op_submit_dag("dag-submitter", SubmitDag.model_validate(body))

    # -- the operator ------------------------------------------------------------------------

    def op_control_dag(self) -> None:
        dag_id = self._pick_dag()
        if dag_id is None:
            return
        roll = self.dag_rng.random()
        if roll < 0.25:
            self._pause_dag(dag_id)
        elif roll < 0.5:
            self._resume_dag(dag_id)
        elif roll < 0.6:
            self._cancel_dag(dag_id)
        elif roll < 0.8:
            self._cancel_node(dag_id)
        else:
            self._retry_node(dag_id)

    def _pick_dag(self) -> str | None:
        """A DAG of an answered submit, or one found in a queue's listing (its submit may still
        be running)."""
        if self.dag_ids and self.dag_rng.random() < 2 / 3:
            return self.dag_rng.choice(self.dag_ids)
        listed = self._listed()
        return self.dag_rng.choice(listed) if listed else None

    def _listed(self) -> list[str]:
        """The DAGs of the first queue's listing (every DAG of the first tenant uses it), oldest
        first, as an operator reads them: one page."""
        views, _ = self.observer.dags.of_queue(
            self.first.queues[0], readable=self.queues, limit=1000, cursor=None
        )
        return [view.id for view in views]

    def _pause_dag(self, dag_id: str) -> None:
        def pause(deps: Dependencies) -> None:
            view = deps.dags.pause(dag_id)
            runs = len(self.ledger.runs)
            for node in view.nodes:
                if node.dag is not None and node.dag.held:
                    self.held_at[node.id].append((runs, dag_id))

        self.ledger.counts["DAG pauses asked"] += 1
        self._answered("dag-operator", pause)

    def _resume_dag(self, dag_id: str) -> None:
        def resume(deps: Dependencies) -> None:
            self.resumed_at[dag_id].append(len(self.ledger.runs))  # before any of its writes
            deps.dags.resume(dag_id)

        self.ledger.counts["DAG resumes asked"] += 1
        self._answered("dag-operator", resume)

    def _cancel_dag(self, dag_id: str) -> None:
        def cancel(deps: Dependencies) -> None:
            self._record_cancelled(deps.dags.cancel(dag_id))

        self.ledger.counts["DAG cancels asked"] += 1
        self._cancelling(dag_id, cancel)

    def _cancel_node(self, dag_id: str) -> None:
        nodes = self.observer.dags.get(dag_id).nodes
        node_id = self.dag_rng.choice(nodes).id

        def cancel(deps: Dependencies) -> None:
            if deps.jobs.cancel(node_id) is Status.CANCELLED:
                # Its cascade is part of the cancel's answer: read right after it.
                self._record_cancelled(self.observer.dags.get(dag_id))

        self.ledger.counts["DAG node cancels asked"] += 1
        self._cancelling(dag_id, cancel)

    def _cancelling(self, dag_id: str, cancel: Any) -> None:
        """A cancel that got no answer may have landed: its DAG's nodes may be cancelled."""
        try:
            self._client_call("dag-operator", cancel)
        except Conflict:
            return
        except BaseException:
            self.ledger.maybe_cancelled.update(
                node.id for node in self.observer.dags.get(dag_id).nodes
            )
            raise

    def _record_cancelled(self, view: DagView) -> None:
        runs = len(self.ledger.runs)
        for node in view.nodes:
            if node.status is Status.CANCELLED and node.id not in self.ledger.retried:
                self.ledger.cancelled.add(node.id)
                self.ledger.cancelled_after.setdefault(node.id, runs)

    def _retry_node(self, dag_id: str) -> None:
        cancelled = [
            node.id
            for node in self.observer.dags.get(dag_id).nodes
            if node.status is Status.CANCELLED
        ]
        if not cancelled:
            return
        node_id = self.dag_rng.choice(cancelled)
        # Recorded before the call (one with no answer may land): its run is let off "cancelled
        # then ran" and "held" (it stays among the cancelled, so a 409 excuses it from running).
        self.ledger.retried.add(node_id)
        self.ledger.counts["DAG node retries asked"] += 1
        self._answered("dag-operator", lambda deps: deps.jobs.retry(node_id))

    # -- the nodes' runs and the drain ------------------------------------------------------

    def dag_node_run_ms(self, job: Envelope) -> int:
        """How long a DAG node's run lasts (none in the drain, which is to finish the work)."""
        if job.dag is None or self.draining:
            return 0
        return self.dag_rng.randrange(0, MAX_NODE_RUN_MS)

    def resume_paused_dags(self) -> None:
        """Every DAG still paused, of an answered submit or found in a listing, resumed."""
        listed = {
            view.id
            for queue in self.first.queues
            for view in self.observer.dags.of_queue(
                queue, readable=self.queues, limit=1000, cursor=None
            )[0]
        }
        for dag_id in sorted(listed | set(self.dag_ids)):
            view = self.observer.dags.get(dag_id)
            if view.status is DagStatus.PAUSED:
                self.resumed_at[dag_id].append(len(self.ledger.runs))
                self.until_admitted(partial(self.observer.dags.resume, dag_id))

    # -- the oracle -------------------------------------------------------------------------

    def check_dag_controls(self) -> list[str]:
        """A node a pause's 200 showed held starts only after a resume of its DAG began."""
        errors = []
        for index, (job_id, _, _) in enumerate(self.ledger.runs):
            if job_id in self.ledger.retried:
                continue
            for paused, dag_id in self.held_at.get(job_id, []):
                # Run counts: the run at `index` began after every answer or call recorded with
                # a count of `index` or less.
                if index < paused:
                    continue
                resumes = self.resumed_at.get(dag_id, [])
                if not any(paused <= resumed <= index for resumed in resumes):
                    errors.append(
                        f"DAG node {job_id} started while its DAG was paused (held at run "
                        f"{paused}, started at run {index}, no resume between)"
                    )
        return errors
