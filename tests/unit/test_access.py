"""sundial.access: callers as API Gateway reports them, principals, and the per-queue lists."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from sundial.access import AccessPolicy, Caller, Permission, QueueAccess, principal_problem
from sundial.settings import Settings

ACCOUNT = "123456789012"


def _caller(user_arn: str, account: str = ACCOUNT, org: str | None = None) -> Caller:
    iam: dict[str, Any] = {"userArn": user_arn, "accountId": account, "principalOrgId": org}
    caller = Caller.from_request_context({"accountId": ACCOUNT, "authorizer": {"iam": iam}})
    assert caller is not None
    return caller


def test_an_assumed_role_session_is_its_role() -> None:
    caller = _caller(f"arn:aws:sts::{ACCOUNT}:assumed-role/payments-api/i-0abc")
    assert (caller.kind, caller.name, caller.account) == ("role", "payments-api", ACCOUNT)
    assert caller.is_(f"arn:aws:iam::{ACCOUNT}:role/payments-api")
    assert caller.is_(f"arn:aws:iam::{ACCOUNT}:role/service/payments-api")  # paths ignored
    assert caller.is_(f"arn:aws:iam::{ACCOUNT}:role/payments-*")
    assert not caller.is_(f"arn:aws:iam::{ACCOUNT}:role/payments")
    assert not caller.is_(f"arn:aws:iam::{ACCOUNT}:user/payments-api")
    assert not caller.is_("210987654321")
    assert caller.is_(ACCOUNT) and caller.is_("stack-account")
    assert "payments-api" in caller.described()


def test_users_roots_organizations_and_other_accounts() -> None:
    user = _caller(f"arn:aws:iam::{ACCOUNT}:user/ops/alice", org="o-abcdefghij")
    assert (user.kind, user.name) == ("user", "alice")
    assert user.is_(f"arn:aws:iam::{ACCOUNT}:user/alice") and user.is_("o-abcdefghij")
    root = _caller(f"arn:aws:iam::{ACCOUNT}:root")
    assert root.kind == "root" and root.is_(ACCOUNT)
    assert not root.is_(f"arn:aws:iam::{ACCOUNT}:user/alice")
    foreign = _caller("arn:aws:iam::210987654321:user/alice", account="210987654321")
    assert not foreign.is_("stack-account") and foreign.is_("210987654321")
    federated = _caller(f"arn:aws:sts::{ACCOUNT}:federated-user/bob")
    assert federated.kind == "other" and federated.is_(ACCOUNT)
    assert not federated.is_(f"arn:aws:iam::{ACCOUNT}:user/bob")


@pytest.mark.parametrize(
    "context",
    [{}, {"authorizer": None}, {"authorizer": {"iam": {"userArn": "x", "accountId": "nope"}}}],
)
def test_a_request_without_an_iam_identity_has_no_caller(context: dict[str, Any]) -> None:
    assert Caller.from_request_context(context) is None


@pytest.mark.parametrize(
    ("principal", "problem"),
    [
        ("stack-account", None),
        (ACCOUNT, None),
        ("o-abcdefghij", None),
        (f"arn:aws:iam::{ACCOUNT}:role/team-*", None),
        (f"arn:aws-cn:iam::{ACCOUNT}:user/path/to/bob", None),
        ("*", "is not a principal"),
        (f"arn:aws:iam::{ACCOUNT}:group/devs", "is not a principal"),
        (f"arn:aws:iam::{ACCOUNT}:role/*-team", "'*' may only end the name"),
    ],
)
def test_principals(principal: str, problem: str | None) -> None:
    found = principal_problem(principal)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_admin_has_every_permission_and_a_missing_queue_is_open_to_its_account() -> None:
    operator = _caller(f"arn:aws:sts::{ACCOUNT}:assumed-role/operator/s")
    admin = _caller(f"arn:aws:iam::{ACCOUNT}:user/admin")
    policy = AccessPolicy(
        queues={
            "email": QueueAccess(
                control=(f"arn:aws:iam::{ACCOUNT}:role/operator",),
                admin=(f"arn:aws:iam::{ACCOUNT}:user/admin",),
            )
        }
    )
    assert policy.allows(operator, Permission.CONTROL, "email")
    assert not policy.allows(operator, Permission.READ, "email")
    assert all(policy.allows(admin, p, "email") for p in Permission)
    assert policy.allows(operator, Permission.ADMIN, "default")  # undeclared: stack account
    assert not policy.allows_everywhere(operator, Permission.READ, ["email", "default"])
    assert policy.allows_everywhere(admin, Permission.READ, ["email", "default"])
    # A caller holding any permission on a queue is of its team (it gets 403s naming what it
    # lacks); one holding none is a stranger there (sundial.api.authorization)
    stranger = _caller("arn:aws:iam::210987654321:user/someone", account="210987654321")
    assert policy.allows_anything(operator, "email")
    assert not policy.allows_anything(stranger, "email")
    assert not policy.allows_anything(stranger, "default")  # open to the stack account only


def test_settings_read_sundial_access_and_refuse_a_bad_one() -> None:
    base = {"table_name": "jobs", "queue_urls": json.dumps({"email": "https://q"})}
    access = {"email": {"submit": [ACCOUNT]}}
    settings = Settings.model_validate({**base, "access": json.dumps(access)})
    assert settings.access.of("email").submit == (ACCOUNT,)
    with pytest.raises(ValidationError, match="not a principal"):
        Settings.model_validate({**base, "access": json.dumps({"email": {"read": ["bob"]}})})
