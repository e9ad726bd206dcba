"""How a request reaches the API: over HTTP(S), SigV4-signed where the API is in AWS.

A transport is any callable from `ApiRequest` to `ApiResponse`; the client adds retries,
errors and models on top. Tests pass one that calls the Lambda handlers in-process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import urllib3

if TYPE_CHECKING:
    from botocore.credentials import Credentials

LOCAL_API = "http://127.0.0.1:8000"


def default_api_url(environ: Mapping[str, str] | None = None) -> str:
    """`SUNDIAL_API` (a deployed API, or any URL), else the local runtime where `make run`
    listens: the same SUNDIAL_HOST and SUNDIAL_API_PORT it reads (127.0.0.1 and 8000 unless
    set), so every local tool given the same settings reaches the same runtime."""
    env = os.environ if environ is None else environ
    if env.get("SUNDIAL_API"):
        return env["SUNDIAL_API"]
    host, port = env.get("SUNDIAL_HOST") or "127.0.0.1", env.get("SUNDIAL_API_PORT") or "8000"
    return f"http://{host}:{port}"


# The local runtime reads the identity a request is "signed" as from this header.
CALLER_HEADER = "X-Sundial-Caller"
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com$")


@dataclass(frozen=True, slots=True)
class ApiRequest:
    method: str
    path: str  # e.g. /jobs/AQAU…, already quoted
    query: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def target(self) -> str:
        """The path with its query string."""
        return f"{self.path}?{urlencode(self.query)}" if self.query else self.path


@dataclass(frozen=True, slots=True)
class ApiResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes


# Sends one request and returns the answer; raises `TransportFailure` if none came.
Transport = Callable[[ApiRequest], ApiResponse]


class TransportFailure(Exception):
    """No answer. `sent` is False when the request certainly never reached the server (the
    connection could not be made), so even a call that is unsafe to repeat may be retried."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def region_of(host: str, explicit: str | None = None) -> str | None:
    """The region to sign for: given, else the one in an `execute-api` host name, else the
    environment's (a custom domain names no region)."""
    if explicit:
        return explicit
    match = _EXECUTE_API_HOST.match(host)
    if match:
        return match.group(1)
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")


class SigV4Signer:
    """Signs requests for API Gateway (service `execute-api`) with botocore's SigV4, using the
    given credentials or the standard chain (environment, profile, SSO, instance role...).
    botocore is imported here, on first use, so a client of the local runtime never loads it."""

    def __init__(self, region: str, credentials: Credentials | None = None) -> None:
        from botocore.session import get_session  # noqa: PLC0415 - only signed clients need it

        if credentials is None:
            session = get_session()
            credentials = session.get_credentials()
            if credentials is None:
                raise RuntimeError(
                    "no AWS credentials found to sign Sundial API requests (the standard "
                    "chain: environment, ~/.aws, SSO, instance or task role)"
                )
        self.region = region
        self._credentials = credentials

    def headers(self, url: str, request: ApiRequest) -> dict[str, str]:
        """The request's headers with the SigV4 ones added (Authorization, X-Amz-Date and, for
        temporary credentials, X-Amz-Security-Token). Signed per attempt: a signature is good
        for 5 minutes, and refreshable credentials may have rotated."""
        from botocore.auth import SigV4Auth  # noqa: PLC0415
        from botocore.awsrequest import AWSRequest  # noqa: PLC0415

        aws_request = AWSRequest(
            method=request.method, url=url, data=request.body or b"", headers=dict(request.headers)
        )
        SigV4Auth(self._credentials, "execute-api", self.region).add_auth(aws_request)
        return dict(aws_request.headers.items())


class HttpTransport:
    """JSON over HTTP(S) with urllib3 (its own retries off: the client decides what may be
    repeated). HTTPS is signed with SigV4, whatever the host (custom domains too); plain HTTP
    (the local runtime) is not, and `caller` sets the identity the local runtime assumes."""

    def __init__(
        self,
        api_url: str = LOCAL_API,
        *,
        region: str | None = None,
        credentials: Credentials | None = None,
        caller: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.base_url = api_url.rstrip("/")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {api_url!r}")
        self.signer: SigV4Signer | None = None
        if parts.scheme == "https":
            signing_region = region_of(parts.hostname, region)
            if signing_region is None:
                raise ValueError(
                    f"cannot tell the AWS region of {parts.hostname}: pass region= or set "
                    "AWS_REGION"
                )
            self.signer = SigV4Signer(signing_region, credentials)
        self.caller = caller
        self._http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=5.0, read=timeout_s), retries=False
        )

    def __call__(self, request: ApiRequest) -> ApiResponse:
        url = f"{self.base_url}{request.target()}"
        headers: dict[str, Any] = {"accept": "application/json", **request.headers}
        if request.body is not None:
            headers["content-type"] = "application/json"
        if self.caller and self.signer is None:
            headers[CALLER_HEADER] = self.caller
        if self.signer is not None:
            signed = ApiRequest(request.method, request.path, request.query, request.body, headers)
            headers = self.signer.headers(url, signed)
        try:
            response = self._http.request(request.method, url, body=request.body, headers=headers)
        except (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError) as e:
            raise TransportFailure(f"cannot connect to {self.base_url}: {e}", sent=False) from e
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise TransportFailure(f"no answer from {self.base_url}: {error}", sent=True) from error
        return ApiResponse(response.status, dict(response.headers.items()), response.data)


_presigned_pool: urllib3.PoolManager | None = None


def get_presigned(url: str, *, timeout_s: float = 60.0) -> ApiResponse:
    """GET a URL that carries its own signature (a lease's presigned `payload_url`): sent as it
    is, never signed again (S3 refuses a request with two signatures). TransportFailure if no
    answer came. One connection pool per process (a worker's pool processes each have theirs)."""
    global _presigned_pool  # noqa: PLW0603 - one pool per process, made on first use
    if _presigned_pool is None:
        _presigned_pool = urllib3.PoolManager(retries=False)
    timeout = urllib3.Timeout(connect=5.0, read=timeout_s)
    try:
        response = _presigned_pool.request("GET", url, timeout=timeout)
    except (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError) as e:
        raise TransportFailure(f"cannot connect to {urlsplit(url).netloc}: {e}", sent=False) from e
    except (urllib3.exceptions.HTTPError, OSError) as error:
        host = urlsplit(url).netloc
        raise TransportFailure(f"no answer from {host}: {error}", sent=True) from error
    return ApiResponse(response.status, dict(response.headers.items()), response.data)
