"""A minimal OpenAI-compatible server for the benchmarks: it does nothing but answer.

Run: python bench/floor_server.py [--latency-s 0.2] [--reply a] [--tokens 1] [--rate 0]

It prints ``floor server at http://127.0.0.1:PORT/v1`` once it listens. It is independent
of pytest-agentbench (standard library only: asyncio streams, one process, one thread),
so the benchmarks' floors and the plugin meet the same cheap server and its cost does not
hide ours. ``POST /v1/chat/completions`` is answered for any body: after ``--latency-s``,
``--tokens`` content deltas of ``--reply`` each (one SSE event per delta when the body
asks for ``"stream": true``, else one JSON reply), then a finish reason and usage. With
``--rate`` tokens per second the deltas are spaced out as a real provider streams them.
HTTP/1.1 keep-alive; a streamed reply is sent with chunked transfer encoding.
"""

from __future__ import annotations

import argparse
import asyncio
import json

HEAD_LIMIT = 65536


def sse_chunks(reply: str, tokens: int) -> list[bytes]:
    """The SSE events of one streamed reply, each one HTTP chunk."""

    def event(delta: dict[str, object], finish: str | None, usage: object = None) -> bytes:
        body: dict[str, object] = {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "x",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            body["usage"] = usage
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    events = [event({"role": "assistant", "content": ""}, None)]
    events += [event({"content": reply}, None) for _ in range(tokens)]
    usage = {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1}
    events.append(event({}, "stop", usage))
    events.append(b"data: [DONE]\n\n")
    return [f"{len(e):x}\r\n".encode() + e + b"\r\n" for e in events]


def whole_reply(reply: str, tokens: int) -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion",
        "model": "x",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply * tokens},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1},
    }
    data = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"


class Floor:
    def __init__(self, latency_s: float, reply: str, tokens: int, rate: float) -> None:
        self.latency_s = latency_s
        self.gap_s = 1 / rate if rate > 0 else 0.0
        self.chunks = sse_chunks(reply, tokens)
        self.streamed = STREAM_HEAD + b"".join(self.chunks) + b"0\r\n\r\n"
        self.whole = whole_reply(reply, tokens)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                if not lines[0].split(" ")[1].endswith("/chat/completions"):
                    writer.write(NOT_FOUND)
                    continue
                if self.latency_s:
                    await asyncio.sleep(self.latency_s)
                if b'"stream":true' not in body.replace(b" ", b""):
                    writer.write(self.whole)
                elif not self.gap_s:
                    writer.write(self.streamed)
                else:
                    writer.write(STREAM_HEAD + self.chunks[0])
                    for chunk in self.chunks[1:]:
                        await writer.drain()
                        await asyncio.sleep(self.gap_s)
                        writer.write(chunk)
                    writer.write(b"0\r\n\r\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


async def main(args: argparse.Namespace) -> None:
    floor = Floor(args.latency_s, args.reply, args.tokens, args.rate)
    server = await asyncio.start_server(
        floor.serve, "127.0.0.1", args.port, backlog=1024, limit=HEAD_LIMIT
    )
    port = server.sockets[0].getsockname()[1]
    print(f"floor server at http://127.0.0.1:{port}/v1", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-s", type=float, default=0.0)
    parser.add_argument("--reply", default="a")
    parser.add_argument("--tokens", type=int, default=1)
    parser.add_argument("--rate", type=float, default=0.0, help="tokens per second")
    asyncio.run(main(parser.parse_args()))
