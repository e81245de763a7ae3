"""Suites and helpers the HTML report tests share (tests/test_html_report*.py)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

#: An answer that would run script and load an image if it reached the page as markup.
HOSTILE = (
    "<script>window.__pwned = 1</script></script><!-- "
    '<img src="http://127.0.0.1:9/x.png" onerror="window.__pwned = 2">'
)

WEB = f"""
[suite]
name = "web"
verifier = {{ kind = "exact" }}
repairs = 1

[[task]]
id = "inject"
input = "Reply <b>hi</b>"
target = "hi"
scripted = [{json.dumps(HOSTILE)}, "hi"]

[[task]]
id = "plain-pass"
input = "say ok"
target = "ok"
scripted = ["ok"]

[[task]]
id = "wrong"
input = "say yes"
target = "yes"
scripted = ["no", "still no"]
"""

LOOPS = """
[suite]
name = "loops"
verifier = { kind = "number" }

[[task]]
id = "stuck"
input = "What is 2 + 2?"
target = 4
scripted = [{ text = "Let me check the sum once more before I answer. ", repeat = 300 }]

[[task]]
id = "fine"
input = "What is 1 + 1?"
target = 2
scripted = ["2"]
"""


def run(pytester: pytest.Pytester, *args: str, out: str = "results") -> Path:
    """A real ``pytest --agentbench`` run in pytester's folder; its run folder."""
    pytester.runpytest("--agentbench", "--agentbench-out", out, "-p", "no:cacheprovider", *args)
    return (pytester.path / out / "latest").resolve()


class Page(HTMLParser):
    """The tags of a page, its script elements and their text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self._text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script, self._text = dict(attrs), []

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._text)))
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self._text.append(data)

    def data_blocks(self) -> dict[str, Any]:
        return {
            str(attrs.get("id")): json.loads(text)
            for attrs, text in self.scripts
            if attrs.get("type") == "application/json"
        }
