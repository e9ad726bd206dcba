"""Where a job runs: on AWS Glue (awsglue is importable there, and only there) or on plain
local PySpark. The entry scripts ask this module for their arguments and their SparkSession and
never import awsglue themselves."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Mapping, Sequence

from pyspark.sql import SparkSession

# What every session needs, on Glue and locally: UTC dates, dynamic partition overwrite,
# standard Parquet timestamps (Athena reads them), and `dt` read back as the string it is
# (as the Glue tables declare it) rather than inferred as a date.
SESSION_CONFIG: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def on_glue() -> bool:
    return importlib.util.find_spec("awsglue") is not None


def job_arguments(argv: Sequence[str], defaults: Mapping[str, str]) -> dict[str, str]:
    """The job's `--name value` arguments: getResolvedOptions on Glue (the job's default
    arguments supply every name), argparse locally with `defaults` for those left out."""
    if on_glue():
        from awsglue.utils import getResolvedOptions  # type: ignore[import-not-found]  # noqa: PLC0415

        resolved: dict[str, str] = getResolvedOptions(list(argv), ["JOB_NAME", *defaults])
        return resolved
    parser = argparse.ArgumentParser(prog=argv[0] if argv else None)
    for name, default in defaults.items():
        parser.add_argument(f"--{name}", default=default)
    return dict(vars(parser.parse_args(list(argv[1:]))))


def local_session(
    app_name: str,
    *,
    master: str = "local[*]",
    shuffle_partitions: int = 4,
    driver_memory: str = "2g",
) -> SparkSession:
    """A local SparkSession configured as the Glue jobs expect (no UI, small shuffles)."""
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
    )
    for key, value in SESSION_CONFIG.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def spark_session(app_name: str) -> SparkSession:
    """Glue's session (through a GlueContext) on Glue, else a local one."""
    if on_glue():
        from awsglue.context import GlueContext  # type: ignore[import-not-found]  # noqa: PLC0415
        from pyspark.context import SparkContext  # noqa: PLC0415

        session: SparkSession = GlueContext(SparkContext.getOrCreate()).spark_session
        for key, value in SESSION_CONFIG.items():
            session.conf.set(key, value)
        return session
    return local_session(app_name)
