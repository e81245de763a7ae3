"""A small ACP agent of our own (standard library only), for the ACP client's tests.

It speaks the Agent Client Protocol over stdio and asks its model through Chat
Completions at ``$OPENAI_BASE_URL`` with ``$OPENAI_API_KEY`` (the gateway's endpoint in a
run, the scripted provider in a unit test; ``$AGENT_MODEL`` names the model, default
``scripted``). Tools the model may call: ``bash`` (after a permission request, run in the
session's cwd), ``read_file`` and ``write_file`` (through the client's ``fs/*`` methods).
When the client offers terminals (``clientCapabilities.terminal``), ``bash`` runs through
them (``terminal/create``, ``wait_for_exit``, ``output``, ``release``) instead of here.
Each prompt sends a plan; message text, tool calls and their results are reported as
session updates; a second prompt continues the same conversation; ``session/cancel``
ends the turn with ``cancelled``. It reports its own usage in the prompt's answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": props, "required": list(props)},
        },
    }
    for name, props in (
        ("bash", {"command": {"type": "string"}}),
        ("read_file", {"path": {"type": "string"}}),
        ("write_file", {"path": {"type": "string"}, "content": {"type": "string"}}),
    )
]

write_lock = threading.Lock()
pending: dict[int, list[object]] = {}
pending_lock = threading.Lock()
next_id = [100]
sessions: dict[str, dict[str, object]] = {}
client_terminals = [False]


def send(message: dict[str, object]) -> None:
    with write_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def call_client(method: str, params: dict[str, object]) -> dict[str, object]:
    with pending_lock:
        next_id[0] += 1
        ident = next_id[0]
        slot: list[object] = [threading.Event(), None]
        pending[ident] = slot
    send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
    event = slot[0]
    assert isinstance(event, threading.Event)
    event.wait(60)
    reply = slot[1]
    return reply if isinstance(reply, dict) else {"error": {"message": "no answer"}}


def update(session: str, body: dict[str, object]) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session, "update": body},
        }
    )


def ask_model(messages: list[dict[str, object]]) -> dict[str, object]:
    """One streamed Chat Completion, put back together: the reply message and usage."""
    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    body = json.dumps(
        {
            "model": os.environ.get("AGENT_MODEL", "scripted"),
            "messages": messages,
            "tools": TOOLS,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    request = urllib.request.Request(
        f"{base}/chat/completions",
        data=body,
        headers={
            "content-type": "application/json",
            "authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}",
        },
    )
    text: list[str] = []
    calls: dict[int, dict[str, object]] = {}
    usage: object = None
    with urllib.request.urlopen(request, timeout=60) as response:
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
                    call = calls.setdefault(
                        part["index"],
                        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    function = call["function"]
                    assert isinstance(function, dict)
                    call["id"] = part.get("id") or call["id"]
                    given = part.get("function") or {}
                    function["name"] += given.get("name") or ""
                    function["arguments"] += given.get("arguments") or ""
    message: dict[str, object] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"choices": [{"message": message}], "usage": usage or {}}


def run_tool(session: str, state: dict[str, object], call: dict[str, object]) -> str:
    function = call["function"]
    assert isinstance(function, dict)
    name = function["name"]
    args = json.loads(function.get("arguments") or "{}")
    ident = str(call.get("id"))
    cwd = str(state["cwd"])
    update(
        session,
        {
            "sessionUpdate": "tool_call",
            "toolCallId": ident,
            "title": name,
            "kind": "execute" if name == "bash" else "edit",
            "status": "pending",
            "rawInput": args,
        },
    )
    if name == "bash":
        answer = call_client(
            "session/request_permission",
            {
                "sessionId": session,
                "toolCall": {"toolCallId": ident, "title": args.get("command", "")},
                "options": [
                    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                ],
            },
        )
        outcome = (answer.get("result") or {}).get("outcome") or {}
        if outcome.get("optionId") != "yes":
            output = "permission refused"
        elif client_terminals[0]:
            output = in_client_terminal(session, args.get("command", ""))
        else:
            done = subprocess.run(
                args.get("command", ""),
                shell=True,
                cwd=cwd,
                text=True,
                capture_output=True,
                timeout=60,
            )
            output = done.stdout + done.stderr + f"[exit {done.returncode}]"
    elif name == "read_file":
        path = args.get("path", "")
        answer = call_client(
            "fs/read_text_file",
            {
                "sessionId": session,
                "path": path if path.startswith("/") else os.path.join(cwd, path),
            },
        )
        result = answer.get("result")
        output = result["content"] if isinstance(result, dict) else f"error: {answer.get('error')}"
    elif name == "write_file":
        path = args.get("path", "")
        answer = call_client(
            "fs/write_text_file",
            {
                "sessionId": session,
                "path": path if path.startswith("/") else os.path.join(cwd, path),
                "content": args.get("content", ""),
            },
        )
        output = "written" if "error" not in answer else f"error: {answer.get('error')}"
    else:
        output = f"unknown tool {name}"
    update(
        session,
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": ident,
            "status": "completed",
            "rawOutput": {"output": output},
        },
    )
    return output


def in_client_terminal(session: str, command: str) -> str:
    """``command`` run in a terminal of the client's; its output and exit status."""
    made = call_client(
        "terminal/create", {"sessionId": session, "command": command, "outputByteLimit": 65536}
    )
    terminal = (made.get("result") or {}).get("terminalId")
    if not terminal:
        return f"error: {made.get('error')}"
    ids = {"sessionId": session, "terminalId": terminal}
    ended = call_client("terminal/wait_for_exit", ids).get("result") or {}
    shown = call_client("terminal/output", ids).get("result") or {}
    call_client("terminal/release", ids)
    return f"{shown.get('output', '')}[exit {ended.get('exitCode')}]"


def prompt(ident: object, params: dict[str, object]) -> None:
    session = str(params["sessionId"])
    state = sessions[session]
    state["cancelled"] = False
    blocks = params.get("prompt")
    text = (
        "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        if isinstance(blocks, list)
        else ""
    )
    messages = state["messages"]
    assert isinstance(messages, list)
    messages.append({"role": "user", "content": text})
    update(
        session,
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "answer the prompt", "priority": "high", "status": "in_progress"}
            ],
        },
    )
    used = {"inputTokens": 0, "outputTokens": 0}
    stop = "end_turn"
    for _ in range(50):
        if state["cancelled"]:
            stop = "cancelled"
            break
        try:
            reply = ask_model(messages)
        except Exception as exc:  # the gateway ended the request (a loop, the deadline)
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "error": {"code": -32603, "message": f"model call failed: {exc}"},
                }
            )
            return
        usage = reply.get("usage") or {}
        used["inputTokens"] += int(usage.get("prompt_tokens") or 0)
        used["outputTokens"] += int(usage.get("completion_tokens") or 0)
        message = reply["choices"][0]["message"]
        messages.append(message)
        if message.get("content"):
            update(
                session,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": message["content"]},
                },
            )
        calls = message.get("tool_calls") or []
        if not calls:
            break
        for call in calls:
            output = run_tool(session, state, call)
            messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": output})
    else:
        stop = "max_turn_requests"
    send({"jsonrpc": "2.0", "id": ident, "result": {"stopReason": stop, "usage": used}})


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method = message.get("method")
        ident = message.get("id")
        params = message.get("params") or {}
        if method is None:  # an answer to one of our requests
            with pending_lock:
                slot = pending.pop(ident, None)
            if slot is not None:
                slot[1] = message
                event = slot[0]
                assert isinstance(event, threading.Event)
                event.set()
        elif method == "initialize":
            capabilities = params.get("clientCapabilities") or {}
            client_terminals[0] = capabilities.get("terminal") is True
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "result": {
                        "protocolVersion": 1,
                        "agentCapabilities": {"loadSession": False},
                        "agentInfo": {"name": "stand-in-acp-agent", "version": "1.0"},
                        "authMethods": [],
                    },
                }
            )
        elif method == "session/new":
            session = f"session-{len(sessions) + 1}"
            sessions[session] = {"cwd": params.get("cwd"), "messages": [], "cancelled": False}
            send({"jsonrpc": "2.0", "id": ident, "result": {"sessionId": session}})
        elif method == "session/prompt":
            threading.Thread(target=prompt, args=(ident, params), daemon=True).start()
        elif method == "session/cancel":
            state = sessions.get(str(params.get("sessionId")))
            if state is not None:
                state["cancelled"] = True
        elif ident is not None:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "error": {"code": -32601, "message": f"{method} not supported"},
                }
            )


if __name__ == "__main__":
    main()
