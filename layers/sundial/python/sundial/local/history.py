"""The local runtime's job history: where it is in the emulator's S3, and copying it to a
local folder, since local Spark cannot read S3 here (no S3A connector jars)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sundial.local.template import LocalTemplate

HISTORY_BUCKET_VARIABLE = "SUNDIAL_HISTORY_BUCKET"
HISTORY_PREFIX_VARIABLE = "SUNDIAL_HISTORY_PREFIX"


@dataclass(frozen=True)
class HistoryLocation:
    bucket: str
    prefix: str


def history_location(template: LocalTemplate) -> HistoryLocation:
    """The raw history bucket and prefix, as the template gives them to the history function.
    The template's names must have been assigned (provision.assign_names)."""
    for lid in template.of_type("AWS::Lambda::Function"):
        variables = template.props(lid).get("Environment", {}).get("Variables", {})
        if HISTORY_BUCKET_VARIABLE in variables:
            return HistoryLocation(
                bucket=str(template.resolve(variables[HISTORY_BUCKET_VARIABLE])),
                prefix=str(template.resolve(variables.get(HISTORY_PREFIX_VARIABLE, "history"))),
            )
    raise LookupError(f"no function in the template has {HISTORY_BUCKET_VARIABLE}")


def export_history(s3: Any, location: HistoryLocation, destination: Path) -> int:
    """Copy every raw history object to `destination/dt=.../...`. Returns the object count."""
    paginator = s3.get_paginator("list_objects_v2")
    copied = 0
    for page in paginator.paginate(Bucket=location.bucket, Prefix=f"{location.prefix}/"):
        for entry in page.get("Contents", []):
            relative = entry["Key"].removeprefix(f"{location.prefix}/")
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(location.bucket, entry["Key"], str(target))
            copied += 1
    return copied
