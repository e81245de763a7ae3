"""The price of a model: the table shipped with the package, the user's price file
(``agentbench_prices``), and the models list's own ``price_in=`` / ``price_out=``.

Which price a model gets, first that has one:

1. its line in the models list (``price_in``, ``price_out``, ``price_cache_read``,
   ``price_cache_write``, per million tokens); kinds it leaves out come from 2 or 3;
2. the user's price file, by the model's name, its spec (``provider/model``) or its spec
   without a date suffix (``-2025-04-14``, ``-20250929``);
3. the shipped table (``prices.json``, dated, each entry naming its source), for the
   hosted providers only, and only when the model is reached at the provider's own API
   (no base URL, or the provider's host): the same model name behind a proxy or a local
   server may cost anything.

Nothing else has a price: a local server costs 0 only when the user says so
(``price_in=0 price_out=0``, or an entry of 0 in the price file); an unknown price stays
unknown (None), never 0.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from pytest_agentbench.core.cost import PRICE_KINDS, Price
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.base import ModelSpec

#: Each provider's own API host: the shipped prices apply there only.
OWN_HOSTS = {
    "openai": "api.openai.com",
    "openai-responses": "api.openai.com",
    "anthropic": "api.anthropic.com",
}
#: The provider whose entries of the shipped table a spec's provider reads.
_TABLE_PROVIDER = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic"}
_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")
#: The models list keys that set a price, and the kind each sets.
LIST_KEYS = {
    "price_in": "input",
    "price_out": "output",
    "price_cache_read": "cache_read",
    "price_cache_write": "cache_write",
}
#: The models list key that sets a model's batch price, a share of its prices (0 to 1).
BATCH_KEY = "price_batch"
#: A price above this per million tokens is surely a typo (dollars per token?).
MAX_PRICE = 100_000.0


def undated(model: str) -> str:
    """``model`` without a trailing date or ``-latest`` (``gpt-4.1-mini-2025-04-14`` →
    ``gpt-4.1-mini``)."""
    return _DATE_SUFFIX.sub("", model)


def _rate(value: JsonValue, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AgentbenchError(f"{where}: expected a price in USD per million tokens, got {value!r}")
    if not 0 <= value <= MAX_PRICE:
        raise AgentbenchError(
            f"{where}: expected a price from 0 to {MAX_PRICE:g} USD per million tokens, "
            f"got {value!r}"
        )
    return float(value)


def parse_entry(data: JsonValue, where: str, source: str) -> Price:
    """One price entry (``input``, ``output``, optional ``cache_read``, ``cache_write``,
    ``source``); AgentbenchError naming ``where`` and the field for anything else."""
    if not isinstance(data, dict):
        raise AgentbenchError(f"{where}: expected a table of prices, got {data!r}")
    unknown = sorted(set(data) - {*PRICE_KINDS, "source", "aliases", "batch"})
    if unknown:
        raise AgentbenchError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(PRICE_KINDS)}, source, batch)"
        )
    for kind in ("input", "output"):
        if data.get(kind) is None:
            raise AgentbenchError(f"{where}: {kind} is required (USD per million tokens)")
    given = data.get("source")
    price = Price(
        input=_rate(data.get("input"), f"{where}.input"),
        output=_rate(data.get("output"), f"{where}.output"),
        cache_read=_rate(data.get("cache_read"), f"{where}.cache_read"),
        cache_write=_rate(data.get("cache_write"), f"{where}.cache_write"),
        source=str(given) if isinstance(given, str) and given else source,
    )
    batch = data.get("batch")
    if batch is None:
        return price
    return replace(price, batch=_batch_price(price, batch, f"{where}.batch"))


def _batch_price(price: Price, batch: JsonValue, where: str) -> Price:
    """An entry's own batch price (``--agentbench-batch``): a share of its prices (a
    number from 0 to 1), or a table of prices like the entry's own."""
    if isinstance(batch, dict):
        return parse_entry(
            {**batch, "source": f"{price.source} (its batch prices)"}, where, price.source
        )
    if isinstance(batch, bool) or not isinstance(batch, int | float) or not 0 <= batch <= 1:
        raise AgentbenchError(
            f"{where}: expected a share of the prices from 0 to 1, or a table of batch "
            f"prices (input, output, cache_read, cache_write), got {batch!r}"
        )
    return price.share(batch)


def _entries(data: JsonValue, where: str, source: str) -> dict[str, Price]:
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise AgentbenchError(
            f'{where}: expected a "models" table: model spec or name → '
            "{input, output, cache_read, cache_write} in USD per million tokens"
        )
    models = data["models"]
    assert isinstance(models, dict)
    found: dict[str, Price] = {}
    for key, entry in models.items():
        price = parse_entry(entry, f"{where}: models.{key}", source)
        found[key] = price
        aliases = entry.get("aliases") if isinstance(entry, dict) else None
        provider = key.partition("/")[0]
        for alias in aliases if isinstance(aliases, list) else []:
            found[f"{provider}/{alias}"] = price
    return found


@cache
def shipped_table() -> tuple[str, dict[str, Price]]:
    """The table shipped with the package: its date and its entries by spec."""
    text = resources.files("pytest_agentbench.models").joinpath("prices.json").read_text("utf-8")
    data: JsonValue = json.loads(text)
    date = data.get("date") if isinstance(data, dict) else None
    entries = _entries(data, "prices.json", "")
    dated = {
        key: replace(price, source=f"built-in table of {date}: {price.source}")
        for key, price in entries.items()
    }
    return str(date), dated


def load_price_file(path: Path) -> dict[str, Price]:
    """The user's price file (TOML, or JSON when its name ends in ``.json``): a
    ``models`` table of entries by model spec, name or bare model id."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentbenchError(f"agentbench prices: cannot read {path}: {exc}") from None
    try:
        data: JsonValue = (
            json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
        )
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise AgentbenchError(f"{path}: not valid {path.suffix or 'TOML'}: {exc}") from None
    return _entries(data, str(path), f"price file {path}")


def own_api(spec: ModelSpec, base_url: str | None) -> bool:
    """Whether the model is reached at its provider's own API (the shipped prices apply)."""
    host = OWN_HOSTS.get(spec.provider)
    if host is None:
        return False
    if not base_url:
        return True
    return (urlsplit(base_url).hostname or "").lower() == host


def _lookup(table: Mapping[str, Price], *keys: str) -> Price | None:
    for key in keys:
        found = table.get(key)
        if found is not None:
            return found
    return None


def resolve_price(
    spec: ModelSpec,
    *,
    name: str | None = None,
    base_url: str | None = None,
    user: Mapping[str, Price] | None = None,
    listed: Mapping[str, float] | None = None,
) -> Price | None:
    """The price of the model ``spec`` (called ``name``, reached at ``base_url``); None
    when nobody knows it (see the module docstring for the order)."""
    label = spec.label
    keys = [k for k in (name, label, undated(label), spec.model, undated(spec.model)) if k]
    found = _lookup(user or {}, *keys)
    if found is None and own_api(spec, base_url):
        provider = _TABLE_PROVIDER[spec.provider]
        found = _lookup(
            shipped_table()[1], f"{provider}/{spec.model}", f"{provider}/{undated(spec.model)}"
        )
    listed = listed or {}
    kinds = {LIST_KEYS[key]: value for key, value in listed.items() if key in LIST_KEYS}
    if kinds:
        base = found or Price(input=None, output=None)
        source = f"models list ({', '.join(sorted(k for k in listed if k in LIST_KEYS))})"
        if found is not None and len(kinds) < len(PRICE_KINDS):
            source += f", the rest from {found.source}"
        found = Price(
            input=kinds.get("input", base.input),
            output=kinds.get("output", base.output),
            cache_read=kinds.get("cache_read", base.cache_read),
            cache_write=kinds.get("cache_write", base.cache_write),
            source=source,
        )
        if found.input is None or found.output is None:
            return None
    share = listed.get(BATCH_KEY)
    if share is not None and found is not None:
        found = replace(found, batch=_batch_price(found, share, f"models list: {BATCH_KEY}"))
    return found


@cache
def _cached_price_file(path: Path, stamp: tuple[int, int]) -> dict[str, Price]:
    return load_price_file(path)


def _price_file(path: Path) -> dict[str, Price]:
    """The price file, read once per version (its absolute path, modification time and
    size: a relative name may mean another file from another folder)."""
    try:
        found = path.resolve().stat()
    except OSError:
        return load_price_file(path)  # (its clear error)
    return _cached_price_file(path.resolve(), (found.st_mtime_ns, found.st_size))


def judge_price(
    label: str,
    base_url: str | None,
    *,
    prices_file: Path | None,
    lineup: Mapping[tuple[str, str | None], Price | None],
) -> Price | None:
    """The price of the judge model ``label`` (a spec, ``provider/model``) reached at
    ``base_url``, by the same rules as the model under test: the models list (when the
    judge is one of the run's models, at the same URL, it gets that model's price), the
    user's price file, the shipped table at the provider's own host. The scripted judge
    has a price only when the price file names it. None when nobody knows it."""
    listed = lineup.get((label, base_url))
    if listed is not None:
        return listed
    try:
        spec = ModelSpec.parse(label)
    except AgentbenchError:
        return None
    user = _price_file(prices_file) if prices_file is not None else {}
    return resolve_price(spec, base_url=base_url, user=user)
