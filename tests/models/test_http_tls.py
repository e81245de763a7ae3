"""A client of a plain-HTTP endpoint (a local server) loads no CA bundle: it sends on
plain sockets of its own (models/plain_http.py), or, through an environment's proxy, on
httpx's transport with a TLS context that is never used (loading the bundle cost ~20 ms
of CPU per run). An https endpoint's client verifies certificates as before."""

from __future__ import annotations

import ssl

import pytest

from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.models.connections import _PlainWay
from pytest_agentbench.models.httpx_path import HttpxThread
from pytest_agentbench.models.openai_chat import OpenAIChatClient


def _context(base_url: str) -> ssl.SSLContext:
    client = OpenAIChatClient(ModelSpec("openai-compat", "x"), base_url=base_url)
    try:
        assert isinstance(client._way, HttpxThread)
        context = client.http._transport._pool._ssl_context  # type: ignore[attr-defined]
        assert isinstance(context, ssl.SSLContext)
        return context
    finally:
        client.close()


def test_a_plain_http_endpoint_is_sent_on_plain_sockets() -> None:
    client = OpenAIChatClient(ModelSpec("openai-compat", "x"), base_url="http://127.0.0.1:9/v1")
    try:
        assert isinstance(client._way, _PlainWay)
    finally:
        client.close()


def test_a_plain_http_endpoint_behind_a_proxy_loads_no_ca_bundle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = OpenAIChatClient(ModelSpec("openai-compat", "x"), base_url="http://127.0.0.1:9/v1")
    try:
        assert isinstance(client._way, HttpxThread)
        (transport,) = [t for t in client.http._mounts.values() if t is not None]
        context = transport._pool._ssl_context  # type: ignore[attr-defined]
        assert isinstance(context, ssl.SSLContext)
        assert context.cert_store_stats()["x509_ca"] == 0
    finally:
        client.close()


def test_an_https_endpoint_still_verifies_against_the_ca_bundle() -> None:
    context = _context("https://127.0.0.1:9/v1")
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.cert_store_stats()["x509_ca"] > 0
