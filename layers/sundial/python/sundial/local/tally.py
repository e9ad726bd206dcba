"""What the live table counts: jobs per queue and status, and DAG nodes per DAG and status,
kept from the table's stream records as the history's reader reads them (StreamPoller's
observer). A refresh then reads no table at all: it used to Scan the whole table twice a
second, which kept an idle runtime at about half a core and let its memory grow with the
table (issue 26).

An item counts while it is a job: a job item's key (sundial.history.capture.is_job_key), not a
retry timer (`retry_of`) and not a moved job's pointer (`moved_to`). Each record takes its old
image out of the counts and puts its new image in, so inserts, status changes, moves (the job
put at its new key, its origin turned into a pointer) and removals all net out to the table's
current state, as a Scan would have counted it.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sundial.history.capture import is_job_key


@dataclass
class Dag:
    name: str
    nodes: Counter[str] = field(default_factory=Counter)  # by status


@dataclass
class Counts:
    """A copy of the counts at one moment."""

    jobs: dict[str, Counter[str]]  # queue -> status -> jobs
    dags: dict[str, Dag]  # DAG id -> its name and nodes by status
    records: int  # stream records seen


class JobTally:
    """Counts kept from stream records; `observe` is called from the stream reader's thread,
    `counts` from the live view's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, Counter[str]] = defaultdict(Counter)
        self._dags: dict[str, Dag] = {}
        self._records = 0

    def observe(self, records: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            for record in records:
                stream = record.get("dynamodb") or {}
                keys = stream.get("Keys") or {}
                if not is_job_key(_text(keys, "pk"), _text(keys, "sk")):
                    continue
                self._count(stream.get("OldImage"), -1)
                self._count(stream.get("NewImage"), +1)
            self._records += len(records)

    def counts(self) -> Counts:
        with self._lock:
            return Counts(
                jobs={queue: Counter(+by_status) for queue, by_status in self._jobs.items()},
                dags={
                    dag_id: Dag(dag.name, Counter(+dag.nodes)) for dag_id, dag in self._dags.items()
                },
                records=self._records,
            )

    def _count(self, image: Mapping[str, Any] | None, sign: int) -> None:
        if not image or "retry_of" in image or "moved_to" in image:
            return
        queue, status = _text(image, "queue"), _text(image, "status")
        if queue is None or status is None:
            return
        self._jobs[queue][status] += sign
        dag_id = _text(image, "dag_id")
        if dag_id is not None:
            dag = self._dags.setdefault(dag_id, Dag(name=_dag_name(image) or dag_id))
            dag.nodes[status] += sign


def _text(image: Mapping[str, Any], name: str) -> str | None:
    value = image.get(name)
    return value.get("S") if isinstance(value, dict) else None


def _dag_name(image: Mapping[str, Any]) -> str | None:
    dag = image.get("dag")
    if isinstance(dag, dict) and isinstance(dag.get("M"), dict):
        return _text(dag["M"], "name")
    return None
