"""Every page under docs/ can be found: it is reached from README.md through the pages'
own links, and every link to a page of the repository points at a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_LINK = re.compile(r"\]\(([^)\s#]+\.md)(?:#[^)]*)?\)")


def _links(page: Path) -> set[Path]:
    found = set()
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if "://" not in target:
            found.add((page.parent / target).resolve())
    return found


def test_every_docs_page_is_reached_from_the_readme() -> None:
    seen: set[Path] = set()
    todo = [ROOT / "README.md"]
    broken = []
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        for target in _links(page):
            if not target.is_file():
                broken.append(f"{page.relative_to(ROOT)} → {target}")
            elif target not in seen:
                todo.append(target)
    assert broken == []
    pages = {path.resolve() for path in (ROOT / "docs").glob("*.md")}
    orphans = sorted(str(path.relative_to(ROOT)) for path in pages - seen)
    assert orphans == []
