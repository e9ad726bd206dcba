"""Who may do what on which queue: the callers the API sees, the access lists a deployment
declares per queue (cdk.json "access", or the construct's grant_* helpers), and the check.

Pure: no AWS call. The API reads the caller from the request context API Gateway fills in after
it has verified the SigV4 signature (`requestContext.authorizer.iam`), never from a header, and
asks `AccessPolicy.allows`. IAM alone cannot do this: a policy can name the path of a route, but
`POST /jobs` carries its queue in the body and `/jobs/{id}` carries none.

A principal in an access list is one of:
- "stack-account": any IAM identity of the account the API runs in (the default for a queue
  that declares no access, which is what IAM auth allowed before access lists existed);
- a 12-digit account id: any IAM identity of that account;
- a role ARN, `arn:aws:iam::<account>:role/<name>`: the role's sessions (an assumed-role caller
  `arn:aws:sts::<account>:assumed-role/<name>/<session>` is mapped to its role). The session ARN
  carries no role path, so a role is matched by account and name, and a path in the ARN is
  ignored; the name may end in `*` (`role/payments-*`);
- a user ARN, `arn:aws:iam::<account>:user/<name>` (matched by account and name, `*` allowed);
- an organization id, `o-<10 to 32 characters>`: any identity of an account in it.
Principal tags cannot be used: API Gateway does not pass them to the function; name roles by
team (`role/payments-*`) instead.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

STACK_ACCOUNT = "stack-account"


class Permission(StrEnum):
    """What a caller may do with a queue's jobs. `admin` includes every other permission."""

    SUBMIT = "submit"  # POST /jobs, /jobs/batch, /dags, /schedules naming the queue
    READ = "read"  # GET a job, DAG, schedule (and its runs) or the queue's state
    CONTROL = "control"  # cancel, retry, pause, resume a job, DAG or schedule; delete one
    WORK = "work"  # lease the queue's jobs; heartbeat, ack, nack them (workers outside Lambda)
    ADMIN = "admin"  # the queue's dead letters (browse, replay, purge); pause/resume the queue


# What each route of the API needs: (method, path as in openapi.json) -> permission. Plain data,
# so the CDK app (stacks/access.py grants `execute-api:Invoke` on a permission's routes) reads it
# without loading the runtime; the API's authorization (sundial.api.authorization) adds where
# each route's queues come from, and refuses to start unless both name the same routes.
_SUBMIT, _READ, _CONTROL, _WORK, _ADMIN = (
    Permission.SUBMIT,
    Permission.READ,
    Permission.CONTROL,
    Permission.WORK,
    Permission.ADMIN,
)
ROUTE_PERMISSIONS: Mapping[tuple[str, str], Permission] = {
    ("POST", "/jobs"): _SUBMIT,
    ("POST", "/jobs/batch"): _SUBMIT,
    ("GET", "/jobs/{job_id}"): _READ,
    # A DAG node's cancel may cascade to its descendants: control on their queues too.
    ("DELETE", "/jobs/{job_id}"): _CONTROL,
    ("POST", "/jobs/{job_id}/retry"): _CONTROL,
    ("POST", "/jobs/{job_id}/pause"): _CONTROL,
    ("POST", "/jobs/{job_id}/resume"): _CONTROL,
    ("PATCH", "/jobs/{job_id}"): _CONTROL,
    ("POST", "/jobs/{job_id}/run-now"): _CONTROL,
    ("POST", "/jobs/{job_id}/heartbeat"): _WORK,
    ("POST", "/jobs/{job_id}/ack"): _WORK,
    ("POST", "/jobs/{job_id}/nack"): _WORK,
    ("POST", "/queues/{queue}/lease"): _WORK,
    ("GET", "/queues"): _READ,
    ("GET", "/queues/{queue}"): _READ,
    ("GET", "/queues/{queue}/jobs"): _READ,
    ("POST", "/queues/{queue}/pause"): _ADMIN,
    ("POST", "/queues/{queue}/resume"): _ADMIN,
    ("GET", "/queues/{queue}/dead"): _ADMIN,
    ("DELETE", "/queues/{queue}/dead"): _ADMIN,
    ("POST", "/queues/{queue}/dead/replay"): _ADMIN,
    ("POST", "/dags"): _SUBMIT,
    ("GET", "/dags"): _READ,
    ("GET", "/dags/{dag_id}"): _READ,
    ("DELETE", "/dags/{dag_id}"): _CONTROL,
    ("POST", "/dags/{dag_id}/pause"): _CONTROL,
    ("POST", "/dags/{dag_id}/resume"): _CONTROL,
    ("POST", "/schedules"): _SUBMIT,
    ("GET", "/schedules"): _READ,
    ("GET", "/schedules/{schedule_id}"): _READ,
    ("DELETE", "/schedules/{schedule_id}"): _CONTROL,
    ("PATCH", "/schedules/{schedule_id}"): _CONTROL,
    ("GET", "/schedules/{schedule_id}/runs"): _READ,
    ("POST", "/schedules/{schedule_id}/pause"): _CONTROL,
    ("POST", "/schedules/{schedule_id}/resume"): _CONTROL,
}

_ACCOUNT = re.compile(r"^\d{12}$")
_ORGANIZATION = re.compile(r"^o-[a-z0-9]{10,32}$")
# arn:<partition>:iam::<account>:role/<path/>name or user/<path/>name
_IAM_ARN = re.compile(
    r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):(?P<kind>role|user)/(?:[\x21-\x7e]*/)?"
    r"(?P<name>[\w+=,.@*-]{1,128})$"
)
_ASSUMED_ROLE = re.compile(
    r"^arn:aws[a-z-]*:sts::(?P<account>\d{12}):assumed-role/(?P<name>[\w+=,.@-]{1,64})/.+$"
)


def principal_problem(principal: str) -> str | None:
    """Why `principal` cannot be in an access list, or None if it can."""
    if principal == STACK_ACCOUNT or _ACCOUNT.match(principal) or _ORGANIZATION.match(principal):
        return None
    match = _IAM_ARN.match(principal)
    if match is None:
        return (
            f"'{principal}' is not a principal: use '{STACK_ACCOUNT}', an account id, an "
            "organization id (o-...), or an IAM role or user ARN"
        )
    if "*" in match["name"][:-1]:
        return f"'{principal}': '*' may only end the name"
    return None


@dataclass(frozen=True, slots=True)
class Caller:
    """The identity a request was signed with, as API Gateway verified it.

    `kind`/`name`: "role" for an assumed-role session (mapped to its role), "user" for an IAM
    user, "root" for the account's root, "other" for anything else (a federated user), with
    `arn` as API Gateway gave it. `api_account`: the account the API itself runs in."""

    arn: str
    account: str
    kind: str
    name: str
    organization: str | None
    api_account: str

    @classmethod
    def from_request_context(cls, context: Mapping[str, Any]) -> Caller | None:
        """The caller of an HTTP API (payload 2.0) request, or None if it carries no IAM
        identity (a route without IAM auth)."""
        iam = (context.get("authorizer") or {}).get("iam") or {}
        arn, account = iam.get("userArn") or "", iam.get("accountId") or ""
        if not arn or not _ACCOUNT.match(account):
            return None
        kind, name = "other", ""
        if assumed := _ASSUMED_ROLE.match(arn):
            kind, name = "role", assumed["name"]
        elif (iam_arn := _IAM_ARN.match(arn)) and "*" not in iam_arn["name"]:
            kind, name = iam_arn["kind"], iam_arn["name"]
        elif arn.endswith(f"::{account}:root"):
            kind = "root"
        return cls(
            arn=arn,
            account=account,
            kind=kind,
            name=name,
            organization=iam.get("principalOrgId") or None,
            api_account=str(context.get("accountId") or ""),
        )

    def described(self) -> str:
        if self.kind == "role":
            return f"role {self.name} of account {self.account} (session {self.arn})"
        return self.arn

    def is_(self, principal: str) -> bool:
        """Whether this caller is, or belongs to, `principal` (see the module docstring)."""
        if principal == STACK_ACCOUNT:
            return self.account == self.api_account
        if _ACCOUNT.match(principal):
            return self.account == principal
        if _ORGANIZATION.match(principal):
            return self.organization == principal
        match = _IAM_ARN.match(principal)
        return (
            match is not None
            and match["account"] == self.account
            and match["kind"] == self.kind
            and fnmatch.fnmatchcase(self.name, match["name"])
        )


class QueueAccess(BaseModel):
    """One queue's access lists: permission -> principals. A permission not listed is granted
    to nobody (but `admin` holders have every permission)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    submit: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    control: tuple[str, ...] = ()
    work: tuple[str, ...] = ()
    admin: tuple[str, ...] = ()

    @field_validator("submit", "read", "control", "work", "admin")
    @classmethod
    def _principals(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        problems = [p for p in map(principal_problem, value) if p]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @classmethod
    def everyone_in_stack_account(cls) -> QueueAccess:
        return cls(admin=(STACK_ACCOUNT,))

    def principals(self, permission: Permission) -> tuple[str, ...]:
        granted: tuple[str, ...] = getattr(self, permission.value)
        return granted if permission is Permission.ADMIN else granted + self.admin

    def allows(self, caller: Caller, permission: Permission) -> bool:
        return any(caller.is_(principal) for principal in self.principals(permission))


class AccessPolicy(BaseModel):
    """Every queue's access. A queue with no entry is open to its stack's account, in full."""

    model_config = ConfigDict(frozen=True)

    queues: dict[str, QueueAccess] = Field(default_factory=dict)

    def of(self, queue: str) -> QueueAccess:
        return self.queues.get(queue) or QueueAccess.everyone_in_stack_account()

    def allows(self, caller: Caller, permission: Permission, queue: str) -> bool:
        return self.of(queue).allows(caller, permission)

    def allows_anything(self, caller: Caller, queue: str) -> bool:
        """Whether `caller` holds any permission at all on `queue`."""
        access = self.of(queue)
        return any(access.allows(caller, permission) for permission in Permission)

    def allows_everywhere(
        self, caller: Caller, permission: Permission, queues: Iterable[str]
    ) -> bool:
        """Whether `caller` has `permission` on every one of `queues` (all the deployment's):
        then a route addressed by id need not read the item to learn its queue."""
        return all(self.allows(caller, permission, queue) for queue in queues)
