"""The suite the interchange tests run (tests/artifacts/test_atif.py,
tests/session/test_otlp.py): a repair round, a killed loop and the built-in loop's tools."""

SUITE = """
[suite]
name = "b"
verifier = { kind = "exact" }
repairs = 1

[[task]]
id = "repaired"
input = "say hi"
target = "hi"
scripted = ["Hi", "hi"]

[[task]]
id = "looping"
input = "count"
target = "x"
repairs = 0
scripted = [{ text = "Let me think about this again. ", repeat = 4000, chunk_size = 31 }]

[[task]]
id = "tools"
input = "Write a.txt holding ok, then say done."
target = "done"
mode = "agent"
tools = ["write_file"]
scripted = [
  { text = "Writing.", tool_calls = [
    { name = "write_file", arguments = { path = "a.txt", content = "ok" } },
  ] },
  "done",
]
"""
