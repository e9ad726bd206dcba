"""Reads the synthesized CloudFormation template (cdk.out) into what the local runtime needs.

Only the template is trusted: resource names, environment variables, handler paths, routes,
schedules and event source mappings all come from it, so a wiring mistake fails locally the
way it would fail in AWS. Intrinsics are resolved against the emulator's physical resources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"


class TemplateError(Exception):
    """The template uses something the local runtime cannot emulate."""


@dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    name: str  # physical name, as Ref gives it
    arn: str
    handler: str
    code_dir: Path
    layer_dirs: tuple[Path, ...]
    environment: dict[str, str]
    timeout_s: int
    memory_mb: int


@dataclass(frozen=True)
class RouteSpec:
    method: str
    path: str  # e.g. /jobs/{job_id}
    function: str  # logical id
    payload_version: str

    @property
    def pattern(self) -> re.Pattern[str]:
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path))
        return re.compile(f"^{regex}$")


@dataclass(frozen=True)
class ScheduleSpec:
    logical_id: str
    name: str
    expression: str
    targets: tuple[str, ...]  # function logical ids
    # Each target's constant input (its Input, a JSON text), or None: EventBridge's own event.
    inputs: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class EventSourceSpec:
    kind: str  # "sqs" or "dynamodb" (a table's stream)
    source: str  # logical id of the queue or the table
    function: str  # logical id
    batch_size: int
    batching_window_s: int
    report_batch_item_failures: bool
    max_concurrency: int | None
    # Stream sources only:
    bisect_on_error: bool = False
    max_retries: int = -1  # -1: until the record expires
    on_failure_arn: str | None = None


@dataclass
class LocalTemplate:
    stack_name: str
    resources: dict[str, dict[str, Any]]
    assembly_dir: Path
    physical: dict[str, str] = field(default_factory=dict)  # logical id -> Ref value
    attributes: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def load(cls, assembly_dir: Path, stack_name: str = "Sundial") -> LocalTemplate:
        path = assembly_dir / f"{stack_name}.template.json"
        if not path.exists():
            raise TemplateError(f"{path} not found: run `make synth` first")
        document = json.loads(path.read_text())
        return cls(
            stack_name=stack_name, resources=document["Resources"], assembly_dir=assembly_dir
        )

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {lid: r for lid, r in self.resources.items() if r["Type"] == resource_type}

    def props(self, logical_id: str) -> dict[str, Any]:
        return dict(self.resources[logical_id].get("Properties", {}))

    # -- intrinsic functions ----------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((name, argument),) = value.items()
            handler = _INTRINSICS.get(name)
            if handler is not None:
                return handler(self, argument)
        return {k: self.resolve(v) for k, v in value.items()}

    def ref(self, name: str) -> str:
        pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack_name,
        }
        if name in pseudo:
            return pseudo[name]
        if name not in self.physical:
            raise TemplateError(f"Ref to {name}, which the local runtime has not created")
        return self.physical[name]

    def get_att(self, logical_id: str, attribute: str) -> str:
        key = (logical_id, attribute)
        if key not in self.attributes:
            raise TemplateError(f"Fn::GetAtt {logical_id}.{attribute} is not available locally")
        return self.attributes[key]

    # -- what the runtime needs -------------------------------------------------------------

    def asset_dir(self, logical_id: str) -> Path:
        """The folder a function's code or a layer's content was zipped from: the S3 object
        key the template names, looked up in the assembly's asset manifest."""
        props = self.props(logical_id)
        location = props.get("Code") or props.get("Content") or {}
        key = location.get("S3Key")
        if not isinstance(key, str):
            raise TemplateError(f"{logical_id}: only S3 asset code is emulated")
        manifest = json.loads((self.assembly_dir / f"{self.stack_name}.assets.json").read_text())
        for destination_key, asset in manifest["files"].items():
            keys = {d["objectKey"] for d in asset["destinations"].values()}
            if key in keys or key == f"{destination_key}.zip":
                path: Path = self.assembly_dir / asset["source"]["path"]
                if path.is_dir():
                    return path
        raise TemplateError(f"{logical_id}: asset {key} is not in the cloud assembly")

    def functions(self) -> dict[str, FunctionSpec]:
        specs = {}
        for lid in self.of_type("AWS::Lambda::Function"):
            props = self.resolve(self.props(lid))
            layer_dirs = tuple(
                self.asset_dir(self._layer_logical_id(arn)) for arn in props.get("Layers", [])
            )
            specs[lid] = FunctionSpec(
                logical_id=lid,
                name=self.ref(lid),
                arn=self.get_att(lid, "Arn"),
                handler=props["Handler"],
                code_dir=self.asset_dir(lid),
                layer_dirs=layer_dirs,
                environment={
                    k: str(v) for k, v in props.get("Environment", {}).get("Variables", {}).items()
                },
                timeout_s=int(props.get("Timeout", 3)),
                memory_mb=int(props.get("MemorySize", 128)),
            )
        return specs

    def _layer_logical_id(self, arn: str) -> str:
        for lid, value in self.physical.items():
            if value == arn:
                return lid
        raise TemplateError(f"layer {arn} is not part of the template")

    def function_by_arn(self, arn: str) -> str:
        for (lid, attribute), value in self.attributes.items():
            if attribute == "Arn" and value == arn:
                return lid
        raise TemplateError(f"no function with ARN {arn}")

    def routes(self) -> list[RouteSpec]:
        integrations = {
            lid: self.resolve(self.props(lid))
            for lid in self.of_type("AWS::ApiGatewayV2::Integration")
        }
        routes = []
        for lid in self.of_type("AWS::ApiGatewayV2::Route"):
            props = self.resolve(self.props(lid))
            method, _, path = props["RouteKey"].partition(" ")
            target = props["Target"].removeprefix("integrations/")
            integration_lid = next(i for i in integrations if self.physical[i] == target)
            integration = integrations[integration_lid]
            if integration.get("IntegrationType") != "AWS_PROXY":
                raise TemplateError(f"route {props['RouteKey']}: only Lambda proxy integrations")
            routes.append(
                RouteSpec(
                    method=method,
                    path=path,
                    function=self.function_by_arn(integration["IntegrationUri"]),
                    payload_version=str(integration.get("PayloadFormatVersion", "2.0")),
                )
            )
        return routes

    def schedules(self) -> list[ScheduleSpec]:
        specs = []
        for lid in self.of_type("AWS::Events::Rule"):
            props = self.resolve(self.props(lid))
            if "ScheduleExpression" not in props or props.get("State", "ENABLED") != "ENABLED":
                continue
            rule_targets = props.get("Targets", [])
            targets = tuple(self.function_by_arn(t["Arn"]) for t in rule_targets)
            inputs = tuple(t.get("Input") for t in rule_targets)
            specs.append(
                ScheduleSpec(lid, self.ref(lid), props["ScheduleExpression"], targets, inputs)
            )
        return specs

    def event_sources(self) -> list[EventSourceSpec]:
        specs = []
        for lid in self.of_type("AWS::Lambda::EventSourceMapping"):
            props = self.resolve(self.props(lid))
            if props.get("Enabled", True) is False:
                continue
            kind, source = self._event_source_by_arn(props["EventSourceArn"])
            function = next(f for f, name in self.physical.items() if name == props["FunctionName"])
            on_failure = props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
            specs.append(
                EventSourceSpec(
                    kind=kind,
                    source=source,
                    function=function,
                    batch_size=int(props.get("BatchSize", 10 if kind == "sqs" else 100)),
                    batching_window_s=int(props.get("MaximumBatchingWindowInSeconds", 0)),
                    report_batch_item_failures="ReportBatchItemFailures"
                    in props.get("FunctionResponseTypes", []),
                    max_concurrency=props.get("ScalingConfig", {}).get("MaximumConcurrency"),
                    bisect_on_error=bool(props.get("BisectBatchOnFunctionError", False)),
                    max_retries=int(props.get("MaximumRetryAttempts", -1)),
                    on_failure_arn=on_failure,
                )
            )
        return specs

    def _event_source_by_arn(self, arn: str) -> tuple[str, str]:
        for (lid, attribute), value in self.attributes.items():
            if value == arn and attribute in ("Arn", "StreamArn"):
                kind = self.resources[lid]["Type"]
                if kind == "AWS::SQS::Queue" and attribute == "Arn":
                    return "sqs", lid
                if kind == "AWS::DynamoDB::Table" and attribute == "StreamArn":
                    return "dynamodb", lid
        raise TemplateError(f"event source {arn} is neither a queue nor a table stream")


def _ref(template: LocalTemplate, argument: Any) -> Any:
    return template.ref(argument)


def _get_att(template: LocalTemplate, argument: Any) -> Any:
    logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
    return template.get_att(logical_id, attribute)


def _join(template: LocalTemplate, argument: Any) -> Any:
    delimiter, values = argument
    return delimiter.join(str(v) for v in template.resolve(values))


def _sub(template: LocalTemplate, argument: Any) -> Any:
    text, variables = (argument, {}) if isinstance(argument, str) else argument
    variables = template.resolve(variables)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in variables:
            return str(variables[name])
        if "." in name:
            return template.get_att(*name.split(".", 1))
        return template.ref(name)

    return re.sub(r"\$\{([^}!]+)\}", replace, text)


def _select(template: LocalTemplate, argument: Any) -> Any:
    index, values = argument
    return template.resolve(values)[int(index)]


_INTRINSICS: Mapping[str, Callable[[LocalTemplate, Any], Any]] = {
    "Ref": _ref,
    "Fn::GetAtt": _get_att,
    "Fn::Join": _join,
    "Fn::Sub": _sub,
    "Fn::Select": _select,
}
