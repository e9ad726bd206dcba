"""Backfill the per-queue listing indexes: once, after upgrading a deployment whose table holds
schedules (or DAGs) created before GET /schedules and GET /dags existed.

    python -m sundial.backfill --table <the job table's name>    (make backfill-index TABLE=...)

It is a Scan: it reads (and is charged for) the whole table once. Each item it adds is written
conditionally (put-if-absent, and for a schedule only while it is not deleted), so it is
idempotent, safe to run while the API serves, and a second run adds nothing.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence

import boto3

from sundial.model.schedule import ScheduleState
from sundial.store.schedules import Indexed, ScheduleStore
from sundial.wiring import boto_config


def backfill_schedules(schedules: ScheduleStore) -> Counter[Indexed]:
    """Index every schedule item of the table that has no listing item; count the outcomes."""
    return Counter(
        Indexed.DELETED if schedule.state is ScheduleState.DELETED else schedules.index(schedule)
        for schedule in schedules.schedule_items()
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sundial.backfill", description=__doc__)
    parser.add_argument("--table", required=True, help="the job table's name")
    args = parser.parse_args(argv)
    client = boto3.client("dynamodb", config=boto_config())
    outcomes = backfill_schedules(ScheduleStore(client, args.table))
    print(
        f"schedules: {outcomes[Indexed.INDEXED]} indexed, {outcomes[Indexed.ALREADY]} already "
        f"listed, {outcomes[Indexed.DELETED]} deleted (not listed)"
    )


if __name__ == "__main__":
    main()
