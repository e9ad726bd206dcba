"""Spark schemas built from sundial_history.columns."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import types as T

from sundial_history.columns import RAW_EVENT, Column, TableSpec

_TYPES: dict[str, T.DataType] = {
    "string": T.StringType(),
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "double": T.DoubleType(),
    "boolean": T.BooleanType(),
    "timestamp": T.TimestampType(),
}


def struct(columns: Sequence[Column]) -> T.StructType:
    return T.StructType(
        [T.StructField(name, _TYPES[kind], nullable=True) for name, kind in columns]
    )


def table_struct(spec: TableSpec) -> T.StructType:
    """The table's schema as the jobs write it: its columns, then its partition keys."""
    return struct([*spec.columns, *spec.partition_keys])


RAW_EVENT_SCHEMA = struct(RAW_EVENT)
