"""Per-queue access: the lists the API functions enforce (SUNDIAL_ACCESS, see sundial.access)
and the IAM side of a grant, kept together so the two never disagree.

`Sundial.grant_submit(queue, role)` (and read/control/work/admin) adds the role to the queue's
list AND gives the role `execute-api:Invoke` on the routes that permission uses: IAM lets the
request in, the list decides which queues it may touch. A queue that declares no `access` in
cdk.json is open to the stack's whole account; a grant on it would narrow nothing (every other
role of the account could still read and cancel its jobs), so it is refused, with the two
things to write instead: `"access": {}` (only what is granted) or `"access": {"admin":
["stack-account"]}` (the account, and the grant besides).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import jsii
from aws_cdk import CfnElement, IStableStringProducer, Lazy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from stacks.nag import acknowledge
from stacks.settings import QueueSettings
from sundial.access import ROUTE_PERMISSIONS, STACK_ACCOUNT, Permission, QueueAccess

ENV_ACCESS = "SUNDIAL_ACCESS"

# Lambda allows 4 KB of environment in all; the queue URLs and settings take about 1 KB. A role
# ARN is a deploy-time token here, so its length is estimated.
MAX_ACCESS_ENV_CHARS = 2_500
_TOKEN_ARN_CHARS = 100


def routes_of(permission: Permission) -> list[tuple[str, str]]:
    """(method, path) of every route that needs `permission` (admin: every route). From the
    route table's plain data: synthesizing loads none of the API's code."""
    return sorted(
        route
        for route, needed in ROUTE_PERMISSIONS.items()
        if permission is Permission.ADMIN or needed is permission
    )


class AccessLists:
    """The queues' access lists: cdk.json's `access`, plus every grant made in code."""

    def __init__(self, queues: Mapping[str, QueueSettings]) -> None:
        self._queues = sorted(queues)
        self._lists: dict[str, dict[Permission, list[str]]] = {
            name: _lists_of(settings.access)
            for name, settings in queues.items()
            if settings.access is not None
        }

    def add(self, queue: str, permission: Permission, principal: str) -> None:
        if queue not in self._queues:
            raise ValueError(f"unknown queue '{queue}' (known: {', '.join(self._queues)})")
        if queue not in self._lists:
            raise ValueError(
                f"queue '{queue}' declares no access lists, so it is open to every identity of "
                f"the stack's account, and granting '{permission}' to one would narrow nothing. "
                f"Say who else may use it, in cdk.json's queues.{queue} (or QueueSettings("
                'access=...)): "access": {} to allow only what is granted in code, or '
                '"access": {"admin": ["stack-account"]} to keep the whole account and add '
                "this grant"
            )
        lists = self._lists[queue]
        if principal not in lists[permission]:
            lists[permission].append(principal)

    def environment_value(self, scope: IConstruct) -> str:
        """SUNDIAL_ACCESS, resolved at synth (after every grant): {queue: {permission: [...]}},
        only the queues whose access is not the default."""
        return Lazy.string(_AccessJson(self, Stack.of(scope)))

    def declared(self) -> dict[str, dict[str, list[str]]]:
        return {
            queue: {p.value: principals for p, principals in lists.items() if principals}
            for queue, lists in sorted(self._lists.items())
        }


@jsii.implements(IStableStringProducer)
class _AccessJson:
    """Produces SUNDIAL_ACCESS when the template is synthesized (a jsii producer object)."""

    def __init__(self, lists: AccessLists, stack: Stack) -> None:
        self._lists, self._stack = lists, stack

    def produce(self) -> str:
        declared = self._lists.declared()
        tokens = sum(
            1
            for lists in declared.values()
            for principals in lists.values()
            for principal in principals
            if "${Token" in principal
        )
        size = len(json.dumps(declared)) + _TOKEN_ARN_CHARS * tokens
        if size > MAX_ACCESS_ENV_CHARS:
            raise ValueError(
                f"the queues' access lists take about {size} characters, more than the "
                f"{MAX_ACCESS_ENV_CHARS} a Lambda environment leaves for them: grant accounts, "
                "organization ids or role name patterns (role/team-*) instead of many single "
                "roles"
            )
        return self._stack.to_json_string(declared)


def _lists_of(access: QueueAccess) -> dict[Permission, list[str]]:
    return {permission: list(getattr(access, permission.value)) for permission in Permission}


def principal_arn(grantee: iam.IRole | iam.IUser) -> str:
    arn = getattr(grantee, "role_arn", None) or getattr(grantee, "user_arn", None)
    if not isinstance(arn, str):
        raise TypeError("a grantee must be an IAM role or user (its ARN names the caller)")
    return arn


def grant_routes(
    api: apigwv2.HttpApi,
    stage: str,
    permission: Permission,
    queue: str,
    grantee: iam.IRole | iam.IUser,
) -> iam.Grant:
    """`execute-api:Invoke` on the routes `permission` uses: routes naming a queue in their path
    for this queue only; routes addressed by id or with the queue in the body for any (the
    access list narrows them to the queue)."""
    routes = sorted(
        {(method, resource_path(path, queue)) for method, path in routes_of(permission)}
    )
    grant = iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["execute-api:Invoke"],
        resource_arns=[api.arn_for_execute_api(method, path, stage) for method, path in routes],
    )
    api_resource = api.node.default_child
    assert isinstance(api_resource, CfnElement)
    api_id = Stack.of(api).get_logical_id(api_resource)
    for method, path in routes:
        if "*" not in path:
            continue
        acknowledge(
            grantee,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:"
            f"<AWS::AccountId>:<{api_id}>/{stage}/{method}{path}]",
            reason=(
                "Any id on a route addressed by id: each job, DAG or schedule has its own "
                "id; the queue's access list (SUNDIAL_ACCESS, checked by the API "
                "on the item's queue) narrows the grant to this queue."
            ),
        )
    return grant


def resource_path(path: str, queue: str) -> str:
    parts = [
        queue if part == "{queue}" else "*" if part.startswith("{") else part
        for part in path.split("/")
    ]
    return "/".join(parts)


__all__ = [
    "ENV_ACCESS",
    "STACK_ACCOUNT",
    "AccessLists",
    "Permission",
    "grant_routes",
    "principal_arn",
    "routes_of",
]
