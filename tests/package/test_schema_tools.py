"""The published JSON Schemas work with standard tools as they ship: given the schema
folder, jsonschema's public API (a registry of the folder's files by name, or a
``retrieve`` that reads the file a ``$ref`` names) and the check-jsonschema CLI resolve
every ``$ref`` between them offline, accept the files a real run writes and reject a
broken one. No ``$id`` or ``$ref`` names a host that would have to serve them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource
from schemas_support import ANSWERS, CODE, run_files

from pytest_agentbench import schemas

FOLDER = Path(schemas.__file__).parent


def refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        found = [str(value[k]) for k in ("$id", "$ref") if isinstance(value.get(k), str)]
        return found + [r for child in value.values() for r in refs(child)]
    if isinstance(value, list):
        return [r for child in value for r in refs(child)]
    return []


def test_no_schema_names_a_host() -> None:
    for path in FOLDER.glob("*.schema.json"):
        for ref in refs(json.loads(path.read_text())):
            assert "://" not in ref, (path.name, ref)
            target = ref.split("#")[0]
            assert not target or (FOLDER / target).is_file(), (path.name, ref)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run's files: answers (pass, repair, fail) and code tasks (inner CTRF)."""
    pytester_dir = tmp_path_factory.mktemp("run")
    (pytester_dir / "bench_answers.toml").write_text(ANSWERS)
    (pytester_dir / "bench_code.toml").write_text(CODE)
    subprocess.run(
        [sys.executable, "-m", "pytest", "--agentbench", "-p", "no:cacheprovider", "-q"],
        cwd=pytester_dir,
        capture_output=True,
        check=False,
        timeout=300,
    )
    return (pytester_dir / "agentbench-results" / "latest").resolve()


def documents(run: Path) -> list[tuple[Path, str]]:
    found = []
    for path in run_files(run):
        name = schemas.schema_for(path.relative_to(run))
        if name is not None:
            found.append((path, name))
    assert {name for _, name in found} >= {"summary", "ctrf", "result", "reward", "inner_ctrf"}
    return found


def copied_folder(tmp_path: Path) -> Path:
    """The schema folder copied elsewhere, as a user would vendor it."""
    folder = tmp_path / "vendored-schemas"
    folder.mkdir()
    for path in FOLDER.glob("*.schema.json"):
        shutil.copy(path, folder / path.name)
    return folder


def test_jsonschema_with_a_registry_of_the_folder(run_folder: Path, tmp_path: Path) -> None:
    folder = copied_folder(tmp_path)
    registry: Registry[Any] = Registry().with_resources(
        (p.name, Resource.from_contents(json.loads(p.read_text())))
        for p in sorted(folder.glob("*.schema.json"))
    )
    for path, name in documents(run_folder):
        schema = json.loads((folder / f"{name}.schema.json").read_text())
        jsonschema.validate(json.loads(path.read_text()), schema, registry=registry)


def test_jsonschema_retrieving_each_file_a_ref_names(run_folder: Path, tmp_path: Path) -> None:
    """A ``retrieve`` that reads the named file from the folder: the refs name files."""
    folder = copied_folder(tmp_path)

    def from_folder(uri: str) -> Resource[Any]:
        path = folder / uri
        if not path.is_file():
            raise NoSuchResource(ref=uri)
        return Resource.from_contents(json.loads(path.read_text()))

    registry: Registry[Any] = Registry(retrieve=from_folder)  # type: ignore[call-arg]
    for path, name in documents(run_folder):
        schema = json.loads((folder / f"{name}.schema.json").read_text())
        jsonschema.validate(json.loads(path.read_text()), schema, registry=registry)
    broken = json.loads((run_folder / "summary.json").read_text())
    broken["tasks"][0]["usage"] = "lots"
    with pytest.raises(jsonschema.ValidationError):
        schema = json.loads((folder / "summary.schema.json").read_text())
        jsonschema.validate(broken, schema, registry=registry)


def test_check_jsonschema_given_the_folder(run_folder: Path, tmp_path: Path) -> None:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema (dev extra) is not installed")
    folder = copied_folder(tmp_path)
    by_schema: dict[str, list[str]] = {}
    for path, name in documents(run_folder):
        by_schema.setdefault(name, []).append(str(path))
    command = [sys.executable, "-m", "check_jsonschema", "--no-cache"]
    for name, paths in sorted(by_schema.items()):
        schema = str(folder / f"{name}.schema.json")
        done = subprocess.run(
            [*command, "--schemafile", schema, *paths], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (name, done.stdout[-2000:], done.stderr[-2000:])
    broken = json.loads((run_folder / "summary.json").read_text())
    broken["tasks"][0]["usage"] = "lots"
    (tmp_path / "summary.json").write_text(json.dumps(broken))
    schema = str(folder / "summary.schema.json")
    done = subprocess.run(
        [*command, "--schemafile", schema, str(tmp_path / "summary.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "usage" in done.stdout, done.stdout[-2000:]
