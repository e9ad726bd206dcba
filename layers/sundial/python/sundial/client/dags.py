"""The client's DAG calls: submit, list, get, cancel, pause and resume (`DagCalls`, a part of
`SundialClient`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from sundial.client.calls import Calls, Repeat, Time, api_time, every_page, segment, without_none
from sundial.client.models import DagDetail, DagPage, DagSummary, OnFailure, ParentResults


class DagCalls(Calls):
    """/dags: workflows of jobs that depend on each other."""

    def submit_dag(
        self,
        name: str,
        nodes: Mapping[str, Mapping[str, Any]],
        *,
        on_failure: OnFailure | None = None,
        parent_results: ParentResults | None = None,
        run_at: Time | None = None,
        delay_seconds: int | None = None,
    ) -> DagDetail:
        """Submit a DAG: `nodes` maps each node's name to `{"queue", "payload", "depends_on",
        ...}`. NOT repeated after a lost answer or a 5xx (the API takes no idempotency key for
        DAGs, so a repeat could create a second DAG): only after a 429 or a failed connection.
        On ServerError, look the DAG up before submitting again."""
        body = without_none(
            {
                "name": name,
                "nodes": {key: dict(node) for key, node in nodes.items()},
                "on_failure": on_failure,
                "parent_results": parent_results,
                "run_at": api_time(run_at),
                "delay_seconds": delay_seconds,
            }
        )
        return self._call(DagDetail, "POST", "/dags", body=body, repeat=Repeat.IF_NOT_APPLIED)

    def dag_page(
        self, queue: str, *, cursor: str | None = None, limit: int | None = None
    ) -> DagPage:
        """One page of the DAGs with a node on the queue, oldest first, with their status. A
        DAG also using a queue the caller may not read is left out. Safe to repeat."""
        query = without_none({"queue": queue, "cursor": cursor, "limit": limit})
        return self._call(DagPage, "GET", "/dags", query=query, repeat=Repeat.SAFE)

    def dags(self, queue: str, *, page_size: int = 100) -> Iterator[DagSummary]:
        """Every DAG of the queue, oldest first, page after page as the iteration goes."""
        return every_page(lambda cursor: self.dag_page(queue, cursor=cursor, limit=page_size))

    def get_dag(self, dag_id: str) -> DagDetail:
        """The DAG's status and every node's. Safe to repeat."""
        return self._call(DagDetail, "GET", f"/dags/{segment(dag_id)}", repeat=Repeat.SAFE)

    def cancel_dag(self, dag_id: str) -> DagDetail:
        """Cancel every node not finished or running. Safe to repeat."""
        return self._call(DagDetail, "DELETE", f"/dags/{segment(dag_id)}", repeat=Repeat.SAFE)

    def pause_dag(self, dag_id: str) -> DagDetail:
        """Release no node until resumed. Safe to repeat."""
        return self._post(DagDetail, f"/dags/{segment(dag_id)}/pause")

    def resume_dag(self, dag_id: str) -> DagDetail:
        """Safe to repeat; a 503 must be repeated, which the client does."""
        return self._post(DagDetail, f"/dags/{segment(dag_id)}/resume")
