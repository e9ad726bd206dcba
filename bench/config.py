"""What the benchmarks take from the project as configured: the "sundial" settings in cdk.json
and, from the synthesized template, each function's memory size and timeout."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STACK = "Sundial"
# Construct name (stacks/functions.py) -> the name the benchmarks use for that function.
_FUNCTIONS = {
    "Submit": "submit",
    "Jobs": "jobs",
    "Sweeper": "sweeper",
    "Fanout": "fanout",
    "Schedules": "schedules",
    "Dags": "dags",
    "ExampleConsumer": "consumer",
}


@dataclass(frozen=True)
class FunctionConfig:
    memory_mb: int
    timeout_s: int


@dataclass(frozen=True)
class BenchConfig:
    shard_count: int
    shards_per_sweeper: int
    retention_days: int
    queues: dict[str, dict[str, Any]]
    functions: dict[str, FunctionConfig] = field(default_factory=dict)
    cdk_out: Path = ROOT / "cdk.out"
    # The HTTP API stage's throttle as synthesized (cdk.json "api"): requests/s and burst.
    api_rate_limit: int = 1000
    api_burst_limit: int = 500

    def memory_mb(self, function: str) -> int:
        return self.functions[function].memory_mb

    def sweeper_count(self) -> int:
        return -(-self.shard_count // self.shards_per_sweeper)

    def as_dict(self) -> dict[str, Any]:
        return {
            "shard_count": self.shard_count,
            "shards_per_sweeper": self.shards_per_sweeper,
            "retention_days": self.retention_days,
            "queues": self.queues,
            "functions": {
                name: {"memory_mb": f.memory_mb, "timeout_s": f.timeout_s}
                for name, f in self.functions.items()
            },
            "cdk_out": str(self.cdk_out),
            "api_rate_limit": self.api_rate_limit,
            "api_burst_limit": self.api_burst_limit,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchConfig:
        return cls(
            shard_count=data["shard_count"],
            shards_per_sweeper=data["shards_per_sweeper"],
            retention_days=data["retention_days"],
            queues=data["queues"],
            functions={k: FunctionConfig(**v) for k, v in data["functions"].items()},
            cdk_out=Path(data["cdk_out"]),
            api_rate_limit=int(data.get("api_rate_limit", 1000)),
            api_burst_limit=int(data.get("api_burst_limit", 500)),
        )


def load_config(
    cdk_out: Path = ROOT / "cdk.out", cdk_json: Path = ROOT / "cdk.json"
) -> BenchConfig:
    settings = json.loads(cdk_json.read_text())["context"]["sundial"]
    template_path = cdk_out / f"{STACK}.template.json"
    if not template_path.exists():
        raise FileNotFoundError(f"{template_path} not found: run `make synth` first")
    resources = json.loads(template_path.read_text())["Resources"]
    functions: dict[str, FunctionConfig] = {}
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        for construct, name in _FUNCTIONS.items():
            if logical_id.startswith(f"{STACK}Functions{construct}Function"):
                props = resource["Properties"]
                functions[name] = FunctionConfig(
                    memory_mb=int(props.get("MemorySize", 128)),
                    timeout_s=int(props.get("Timeout", 3)),
                )
    stages = [r for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    if len(stages) != 1:
        raise ValueError(f"{template_path}: expected one API stage, found {len(stages)}")
    throttle = stages[0]["Properties"]["DefaultRouteSettings"]
    missing = set(_FUNCTIONS.values()) - set(functions)
    if missing:
        raise ValueError(f"{template_path}: no function for {sorted(missing)}")
    return BenchConfig(
        shard_count=int(settings.get("shard_count", 64)),
        shards_per_sweeper=int(settings.get("shards_per_sweeper", 8)),
        retention_days=int(settings.get("retention_days", 30)),
        queues=dict(settings["queues"]),
        functions=functions,
        cdk_out=cdk_out,
        api_rate_limit=int(throttle["ThrottlingRateLimit"]),
        api_burst_limit=int(throttle["ThrottlingBurstLimit"]),
    )
