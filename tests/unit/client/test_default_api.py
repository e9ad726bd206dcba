"""Which API the client, the CLI and `sundial ui` talk to when no --api is given (issue 26:
`make run` read SUNDIAL_API_PORT while the CLI read only SUNDIAL_API, so on a shared machine it
quietly talked to someone else's runtime on port 8000)."""

from __future__ import annotations

import pytest

from sundial.client import SundialClient
from sundial.client.transport import default_api_url


def test_the_local_runtime_is_found_by_the_settings_make_run_reads() -> None:
    assert default_api_url({}) == "http://127.0.0.1:8000"
    assert default_api_url({"SUNDIAL_API_PORT": "8123"}) == "http://127.0.0.1:8123"
    assert (
        default_api_url({"SUNDIAL_HOST": "0.0.0.0", "SUNDIAL_API_PORT": "8123"})
        == "http://0.0.0.0:8123"
    )


def test_sundial_api_names_any_api_and_wins() -> None:
    environ = {"SUNDIAL_API": "https://sundial.example.com", "SUNDIAL_API_PORT": "8123"}
    assert default_api_url(environ) == "https://sundial.example.com"


def test_the_client_reads_the_same_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUNDIAL_API", raising=False)
    monkeypatch.setenv("SUNDIAL_API_PORT", "8123")
    assert SundialClient().api_url == "http://127.0.0.1:8123"
