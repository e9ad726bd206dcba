"""Glue job `history_report`: the `job_history` table -> the report tables (Parquet by dt, for
Athena) and a human report (HTML and Markdown with PNG charts) under <reports_path>/human/.

Arguments (Glue job arguments, or the same flags locally):
  --curated_path  the job_history table's folder or S3 URI
  --reports_path  where the report tables and the human report go
  --dates         auto | all | YYYY-MM-DD[,...]: the days whose report tables are rewritten;
                  the human report covers the --report_days days ending with the last of them
  --report_days   default 14
"""

import sys

from sundial_history.jobs import REPORT_DAYS, run_report
from sundial_history.runtime import job_arguments, spark_session


def main(argv: list[str]) -> None:
    args = job_arguments(
        argv,
        {
            "curated_path": "",
            "reports_path": "",
            "dates": "auto",
            "report_days": str(REPORT_DAYS),
        },
    )
    result = run_report(
        spark_session("history_report"),
        curated_path=args["curated_path"],
        reports_path=args["reports_path"],
        dates=args["dates"],
        report_days=int(args["report_days"]),
    )
    tables = ", ".join(result.computed) or "no day (no compacted history for the days asked)"
    print(f"report tables rewritten for {tables}")
    print(f"report for {result.dates[0]}..{result.dates[-1]}: {result.report_uri}")


if __name__ == "__main__":
    main(sys.argv)
