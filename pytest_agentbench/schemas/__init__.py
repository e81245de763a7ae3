"""The published JSON Schemas (draft 2020-12) of the files a run writes.

    >>> from pytest_agentbench import schemas
    >>> schemas.load("reward")["title"]
    'pytest-agentbench verifier/reward.json'

``NAMES`` lists them; ``schema_for`` says which one a file of a run folder is, by its
place; ``validate`` checks a document (``$ref`` between the schemas resolve locally).
The files ship with the package (``pytest_agentbench/schemas/<name>.schema.json``).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import PurePath
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject

if TYPE_CHECKING:
    from referencing import Registry

NAMES = (
    "task_record",
    "result",
    "trajectory",
    "reward",
    "judge",
    "inner_ctrf",
    "ctrf",
    "ctrf_extra",
    "summary",
    "batches",
    "atif",
)
# No schema has an ``$id`` and a ``$ref`` to another names its file, so the folder works
# with standard tools as it ships: check-jsonschema given a schema file resolves the
# others next to it (the file's own location is the base), and jsonschema resolves them
# through a registry of the folder's files under their file names (``registry``), or a
# ``retrieve`` that reads the file named. Nothing names a host that would have to serve
# them.


@cache
def _text(name: str) -> str:
    if name not in NAMES:
        raise KeyError(f"no schema named {name!r}; the published ones are {', '.join(NAMES)}")
    return resources.files(__name__).joinpath(f"{name}.schema.json").read_text("utf-8")


def load(name: str) -> JsonObject:
    """The schema ``name`` (one of :data:`NAMES`) as a fresh dict."""
    schema = json.loads(_text(name))
    if not isinstance(schema, dict):
        raise TypeError(f"{name}.schema.json: not a JSON object")
    return schema


def schema_for(path: str | PurePath) -> str | None:
    """The schema of the file at ``path`` inside a run folder (``summary.json``,
    ``tasks/<suite>/<task>/result.json``, ``…/verifier/reward.json`` …); None for a file
    no schema describes."""
    parts = PurePath(path).parts
    name = parts[-1] if parts else ""
    if len(parts) == 1:
        return {"summary.json": "summary", "ctrf.json": "ctrf", "batches.json": "batches"}.get(name)
    if parts[0] == "atif" and name.endswith(".atif.json"):  # export atif's default folder
        return "atif"
    if parts[0] not in ("tasks", "controls"):  # controls/<suite>/<task>/<control>/…
        return None
    if len(parts) >= 2 and parts[-2] == "verifier":
        return {"reward.json": "reward", "ctrf.json": "inner_ctrf", "judge.json": "judge"}.get(name)
    return {"result.json": "result", "trajectory.json": "trajectory"}.get(name)


def registry() -> Registry[JsonObject]:
    """A ``referencing`` registry of every published schema under its file name
    (``task_record.schema.json``): what any jsonschema user builds from the folder, as
    ``validate`` does."""
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    found: Registry[JsonObject] = Registry().with_resources(
        (f"{other}.schema.json", DRAFT202012.create_resource(load(other))) for other in NAMES
    )
    return found


def validate(name: str, document: object) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` matches schema ``name``."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(load(name), registry=registry())
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        raise error
