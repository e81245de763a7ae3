"""A client of a plain-HTTP endpoint (a local server) loads no CA bundle: its TLS context
is never used, and loading the bundle cost ~20 ms of CPU per run. An https endpoint's
client verifies certificates as before."""

from __future__ import annotations

import ssl

from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.models.openai_chat import OpenAIChatClient


def _context(base_url: str) -> ssl.SSLContext:
    client = OpenAIChatClient(ModelSpec("openai-compat", "x"), base_url=base_url)
    try:
        context = client._http._transport._pool._ssl_context  # type: ignore[attr-defined]
        assert isinstance(context, ssl.SSLContext)
        return context
    finally:
        client.close()


def test_a_plain_http_endpoint_loads_no_ca_bundle() -> None:
    assert _context("http://127.0.0.1:9/v1").cert_store_stats()["x509_ca"] == 0


def test_an_https_endpoint_still_verifies_against_the_ca_bundle() -> None:
    context = _context("https://127.0.0.1:9/v1")
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.cert_store_stats()["x509_ca"] > 0
