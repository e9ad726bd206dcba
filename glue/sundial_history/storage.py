"""Paths and URIs: listing the `dt=` partitions of a table folder (Hadoop's FileSystem, so
the same code reads local paths and, on Glue, s3:// URIs) and writing the report's files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession


def partition_sizes(spark: SparkSession, root: str) -> dict[str, int]:
    """{date: bytes} for every `dt=YYYY-MM-DD` folder directly under `root` ({} if none)."""
    jvm: Any = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(root)
    filesystem = path.getFileSystem(conf)
    if not filesystem.exists(path):
        return {}
    sizes: dict[str, int] = {}
    for status in filesystem.listStatus(path):
        name = status.getPath().getName()
        if status.isDirectory() and name.startswith("dt="):
            sizes[name.removeprefix("dt=")] = int(
                filesystem.getContentSummary(status.getPath()).getLength()
            )
    return dict(sorted(sizes.items()))


def delete_partitions(spark: SparkSession, root: str, dates: Iterable[str]) -> list[str]:
    """Delete the `dt=` folders of `dates` under `root` that exist; returns those deleted."""
    jvm: Any = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    deleted = []
    for date in sorted(set(dates)):
        path = jvm.org.apache.hadoop.fs.Path(join(root, f"dt={date}"))
        filesystem = path.getFileSystem(conf)
        if filesystem.exists(path):
            filesystem.delete(path, True)
            deleted.append(date)
    return deleted


def join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])


def write_bytes(uri: str, data: bytes, content_type: str) -> None:
    """Write one file to a local path or an s3:// URI (boto3 is on Glue; locally, paths)."""
    if uri.startswith("s3://"):
        import boto3  # noqa: PLC0415 - only where the report goes to S3

        bucket, _, key = uri.removeprefix("s3://").partition("/")
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type)
        return
    path = Path(uri.removeprefix("file://"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
