"""Glue job `compact_history`: raw job history (gzip JSON lines, dt= folders) -> the
`job_history` table (Parquet by dt), deduplicated by event id, re-runnable per day.

Arguments (Glue job arguments, or the same flags locally):
  --raw_path      folder or S3 URI holding dt=YYYY-MM-DD/ raw folders
  --curated_path  where the job_history table's Parquet goes
  --dates         auto (the two days before today, UTC) | all | YYYY-MM-DD[,YYYY-MM-DD...]

Days asked that have no raw history are skipped; with none at all the job succeeds and says so.
"""

import sys

from sundial_history.jobs import run_compaction
from sundial_history.runtime import job_arguments, spark_session


def main(argv: list[str]) -> None:
    args = job_arguments(argv, {"raw_path": "", "curated_path": "", "dates": "auto"})
    result = run_compaction(
        spark_session("compact_history"),
        raw_path=args["raw_path"],
        curated_path=args["curated_path"],
        dates=args["dates"],
    )
    print(f"{result.summary} -> {args['curated_path']}")


if __name__ == "__main__":
    main(sys.argv)
