"""A stand-in agent under test: a small coding agent using only the standard library.

It calls its model through the OpenAI Chat Completions API at ``OPENAI_BASE_URL`` with
``OPENAI_API_KEY`` (pytest-agentbench's gateway sets both), streams each reply, runs the
tools the model calls (``bash``, ``write_file``, ``read_file``) in its working folder,
and prints its final message. Its conversation is kept in ``.standin-session.json`` in
the working folder, so ``--resume`` continues it with a new prompt (a repair round).

    python standin_agent.py [--resume] PROMPT      (or the prompt on stdin)
"""

import json
import os
import subprocess
import sys
import urllib.request

SESSION = ".standin-session.json"
MAX_TURNS = 20
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": what,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string"} for key in keys},
                "required": list(keys),
            },
        },
    }
    for name, what, keys in (
        ("bash", "Run a shell command in the working folder.", ("command",)),
        ("write_file", "Write a text file.", ("path", "content")),
        ("read_file", "Read a text file.", ("path",)),
    )
]


def ask(messages):
    """One streamed Chat Completions call: the reply's text, tool calls and usage."""
    body = {
        "model": os.environ.get("STANDIN_MODEL", "standin"),
        "messages": messages,
        "tools": TOOLS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
        },
    )
    text, calls, usage = [], {}, None
    with urllib.request.urlopen(request, timeout=600) as response:
        for raw in response:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                text.append(delta.get("content") or "")
                for part in delta.get("tool_calls") or []:
                    call = calls.setdefault(part["index"], {"id": "", "name": "", "arguments": ""})
                    call["id"] = part.get("id") or call["id"]
                    function = part.get("function") or {}
                    call["name"] += function.get("name") or ""
                    call["arguments"] += function.get("arguments") or ""
    return "".join(text), [calls[i] for i in sorted(calls)], usage


def run_tool(name, arguments):
    try:
        args = json.loads(arguments or "{}")
        if name == "bash":
            done = subprocess.run(
                args["command"], shell=True, capture_output=True, text=True, timeout=60
            )
            return done.stdout + done.stderr + f"[exit code {done.returncode}]"
        if name == "write_file":
            folder = os.path.dirname(args["path"])
            if folder:
                os.makedirs(folder, exist_ok=True)
            with open(args["path"], "w", encoding="utf-8") as handle:
                handle.write(args["content"])
            return f"wrote {len(args['content'])} characters to {args['path']}"
        if name == "read_file":
            with open(args["path"], encoding="utf-8") as handle:
                return handle.read()
        return f"error: no tool called {name}"
    except Exception as exc:  # the model reads its mistake on its next turn
        return f"error: {type(exc).__name__}: {exc}"


def main(argv):
    resume = "--resume" in argv
    words = [arg for arg in argv if arg != "--resume"]
    prompt = " ".join(words) if words else sys.stdin.read()
    messages = []
    if resume and os.path.exists(SESSION):
        with open(SESSION, encoding="utf-8") as handle:
            messages = json.load(handle)
    messages.append({"role": "user", "content": prompt})
    totals = {"prompt_tokens": 0, "completion_tokens": 0}
    text = ""
    for _ in range(MAX_TURNS):
        text, calls, usage = ask(messages)
        for key in totals:
            totals[key] += (usage or {}).get(key, 0)
        turn = {"role": "assistant", "content": text}
        if calls:
            turn["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ]
        messages.append(turn)
        if not calls:
            break
        for call in calls:
            output = run_tool(call["name"], call["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    with open(SESSION, "w", encoding="utf-8") as handle:
        json.dump(messages, handle)
    print(text)
    print(json.dumps({"usage": totals}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
