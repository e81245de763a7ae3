"""The short cuts of the streaming clients give exactly what the general paths give.

- the SSE parser's one-event-per-chunk short cut against its general path (a stream fed
  one byte at a time never takes it), however the stream is split;
- StringSlot matches against ``json.loads`` of the same text, on valid and mutated text;
- ``feed_slot`` against ``feed_fields``, chunk by chunk.

The clients over real sockets and the deadline clock: test_sse_fast_clients.py.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from sse_support import responses_text

from pytest_agentbench.models.event_json import StringSlot, parse_json
from pytest_agentbench.models.sse import SSEParser

# --- the SSE short cut against the general path --------------------------------------


def chat_event(content: str, **extra: Any) -> bytes:
    chunk = {"id": "c1", "choices": [{"index": 0, "delta": {"content": content}}], **extra}
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"


#: Streams as lists of events; the short cut takes a chunk that is exactly one event.
STREAMS: dict[str, list[bytes]] = {
    "chat": [
        chat_event(piece)
        for piece in ["Hé", "llo 😀", ' "quoted" \\ ', "\n\t", "ünïcødé ✓", "", "end"]
    ]
    + [b"data: [DONE]\n\n"],
    "named": [
        b"event: content_block_delta\ndata: "
        + json.dumps(
            {"type": "content_block_delta", "delta": {"text": piece}}, ensure_ascii=False
        ).encode()
        + b"\n\n"
        for piece in ["a", "ß", "日本", "z"]
    ],
    "oddities": [
        b"\xef\xbb\xbfdata: bom first\n\n",
        b"event: pending\n",
        b"data: typed by the line before\n\n",
        b"data:no space\n\n",
        b"data: two\ndata: lines\n\n",
        b": a comment\n\n",
        b"id: 7\nretry: 150\n\n",
        b"event:\ndata: empty type\n\n",
        b"data: \n\n",
        b"data: crlf\r\n\r\n",
        b"data: lone cr\r\r",
        b"data: bad \xff byte\n\n",
        b"data: caf\xc3\xa9 \xf0\x9f\x98\x80\n\n",
        b"event: x\ndata: a\ndata: b\n\n",
        b"data: after all\n\n",
        b"data: never dispatched",
    ],
}


def general(stream: bytes) -> tuple[list[tuple[str, str, str]], int | None]:
    """The general path alone: a chunk of one byte never takes the short cut."""
    parser = SSEParser()
    events = [e for i in range(len(stream)) for e in parser.feed_fields(stream[i : i + 1])]
    return events, parser.retry


def fed(chunks: list[bytes]) -> tuple[list[tuple[str, str, str]], int | None]:
    parser = SSEParser()
    return [e for chunk in chunks for e in parser.feed_fields(chunk)], parser.retry


@pytest.mark.parametrize("name", list(STREAMS))
def test_the_short_cut_gives_the_general_events_however_the_stream_is_split(name):
    events = STREAMS[name]
    stream = b"".join(events)
    expected = general(stream)
    assert expected[0], "the reference produced nothing"
    assert fed([stream]) == expected
    assert fed(events) == expected  # one chunk per event: the short cut's case
    for cut in range(len(stream) + 1):
        assert fed([stream[:cut], stream[cut:]]) == expected, f"split at byte {cut}"
    for index, event in enumerate(events):
        for cut in range(len(event) + 1):
            chunks = [*events[:index], event[:cut], event[cut:], *events[index + 1 :]]
            assert fed(chunks) == expected, f"event {index} split at byte {cut}"


def test_the_short_cut_keeps_the_spec_details():
    parser = SSEParser()
    fields = [e for chunk in STREAMS["oddities"] for e in parser.feed_fields(chunk)]
    assert fields[:3] == [
        ("message", "bom first", ""),
        ("pending", "typed by the line before", ""),
        ("message", "no space", ""),
    ]
    assert ("message", "empty type", "7") in fields
    assert ("message", "bad \ufffd byte", "7") in fields
    assert ("x", "a\nb", "7") in fields
    assert parser.retry == 150
    assert [e.data for e in SSEParser().feed(b"".join(STREAMS["chat"]))][-1] == "[DONE]"


# --- StringSlot against json.loads ---------------------------------------------------

CHAT_PATH = ("choices", 0, "delta")


def chat_text(content: Any, **extra: Any) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
            **extra,
        }
    )


def learned(previous: str, text: str, path: tuple[Any, ...], key: str, reads: Any) -> StringSlot:
    slot = StringSlot.learn(text, json.loads(text), path, key, json.loads(previous), reads)
    assert slot is not None
    return slot


def agrees(
    slot: StringSlot, learned_text: str, text: str, path: tuple[Any, ...], key: str
) -> str | None:
    """The slot's answer for ``text`` is None or exactly what decoding gives: the same
    object as the learned one but for the slot's string and the holes."""
    found = slot.match(text)
    if found is None:
        return None
    decoded = json.loads(text)  # a match on text json.loads rejects fails here
    assert found == _at(decoded, path)[key] and type(found) is str
    reference = json.loads(learned_text)
    _at(reference, path)[key] = found
    for name in ("sequence_number", "obfuscation"):
        if name in reference:
            assert type(decoded[name]) is type(reference[name])
            reference[name] = decoded[name]
    assert decoded == reference
    return found


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


VALUES = ["", "plain", 'a "quote"', "back\\slash", "new\nline", "ünï 😀", '"}]}', "\u2028"]


def test_a_chat_slot_reads_any_string_and_nothing_else():
    slot = learned(chat_text("one"), chat_text("two"), CHAT_PATH, "content", ("choices",))
    for value in VALUES:
        for ascii_only in (True, False):
            text = json.dumps(json.loads(chat_text(value)), ensure_ascii=ascii_only)
            assert agrees(slot, chat_text("two"), text, CHAT_PATH, "content") == value
    for other in [
        chat_text(None),
        chat_text(5),
        chat_text(["x"]),
        chat_text("x", usage={"total_tokens": 1}),
        chat_text("x").replace('"finish_reason": null', '"finish_reason": "length"'),
        chat_text("x") + " ",
        chat_text("x")[:-1],
        chat_text("x").replace('"x"', '"x'),
        chat_text("x").replace('"x"', '"\\q"'),
        chat_text("x").replace('"x"', '"a\tb"'),  # a raw control character
        chat_text("x").replace('"x"', '"a", "content": "b"'),
    ]:
        assert agrees(slot, chat_text("two"), other, CHAT_PATH, "content") is None, other


def test_holes_follow_openai_sequence_numbers_and_padding():
    slot = learned(
        responses_text("a", 4, "xyz"),
        responses_text("b", 5, "pq"),
        (),
        "delta",
        ("type", "error", "delta", "item_id", "summary_index", "content_index"),
    )
    base = responses_text("b", 5, "pq")
    assert agrees(slot, base, responses_text("ok", 6, "r"), (), "delta") == "ok"
    assert agrees(slot, base, responses_text("", 1234567, ""), (), "delta") == ""
    for other in [
        responses_text("x", 6.5, "r"),
        responses_text("x", "6", "r"),
        responses_text("x", True, "r"),
        responses_text("x", 6, 7),
        responses_text("x", 6, "r").replace('"sequence_number":6', '"sequence_number":06'),
        responses_text("x", 6, "r").replace("msg_1", "msg_2"),
        responses_text(None, 6, "r"),
    ]:
        assert agrees(slot, base, other, (), "delta") is None, other


def test_mutated_text_never_matches_wrongly():
    """Random edits of the learned text, half of them in or next to a hole: every match is
    exactly what json.loads says."""
    rng = random.Random(3)
    cases = [
        (chat_text("one"), chat_text("two"), CHAT_PATH, "content", ("choices",), ['"two"']),
        (
            responses_text("a", 4, "xyz"),
            responses_text("b", 5, "pq"),
            (),
            "delta",
            ("type", "error", "delta", "item_id"),
            ['"b"', ":5,", '"pq"'],
        ),
    ]
    alphabet = ['"', "\\", "}", "]", ",", ":", " ", "0", "1", ".", "e", "-", "u", "x", "\n"]
    for previous, text, path, key, reads, holes in cases:
        slot = learned(previous, text, path, key, reads)
        near = [text.index(hole) + offset for hole in holes for offset in range(len(hole) + 1)]
        matched = 0
        for _ in range(3000):
            edited = list(text)
            for _ in range(rng.randint(1, 3)):
                spot = rng.choice(near) if rng.random() < 0.5 else rng.randrange(len(edited))
                spot = min(spot, len(edited))
                action = rng.random()
                if action < 0.4 and spot < len(edited):
                    edited[spot] = rng.choice(alphabet)
                elif action < 0.7:
                    edited.insert(spot, rng.choice(alphabet))
                elif spot < len(edited):
                    del edited[spot]
            candidate = "".join(edited)
            try:
                json.loads(candidate)
            except ValueError:
                assert slot.match(candidate) is None, candidate
                continue
            if agrees(slot, text, candidate, path, key) is not None:
                matched += 1
        assert matched > 100  # edits inside the holes keep matching


def test_a_slot_is_only_learned_where_it_can_be_proven():
    misleading = json.dumps(
        {"meta": {"content": "hi"}, "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    )
    previous = json.loads(misleading)
    slot = StringSlot.learn(misleading, json.loads(misleading), CHAT_PATH, "content", previous)
    if slot is not None:  # whatever it learned must still agree with json.loads
        other = misleading.replace('"hi"', '"yo"', 1)
        assert agrees(slot, misleading, other, CHAT_PATH, "content") in (None, "hi")
    no_string = chat_text(None)
    assert StringSlot.learn(no_string, json.loads(no_string), CHAT_PATH, "content", {}) is None
    assert StringSlot.learn("{}", {}, CHAT_PATH, "content", {}) is None


def test_parse_json_is_json_loads():
    texts = ['{"a": [1, 2.5, "é"]}', "{}", ' {"a": 1} ', '{"a": 1} x', '{"a": 1} {}', "[1]", "{"]
    for text in texts:
        try:
            expected: Any = json.loads(text)
        except ValueError as exc:
            with pytest.raises(ValueError) as info:
                parse_json(text)
            assert str(info.value) == str(exc)
        else:
            assert parse_json(text) == expected


# --- feed_slot against feed_fields ---------------------------------------------------


def test_feed_slot_consumes_a_chunk_exactly_as_feed_fields_would():
    first, second = chat_event("one"), chat_event("two")
    parser = SSEParser()
    parser.feed_fields(first)
    ((_, data, _),) = parser.feed_fields(second)
    slot = StringSlot.learn(data, json.loads(data), CHAT_PATH, "content", json.loads(first[6:]))
    assert slot is not None
    framed = parser.framed(slot)
    assert framed is not None
    chunks = [
        chat_event("three"),
        chat_event('esc "\\ ü'),
        b"event: pending\n",
        chat_event("typed by the pending line"),
        chat_event("four") + chat_event("five"),
        chat_event("six")[:9],
        chat_event("six")[9:],
        chat_event("x", usage={"total_tokens": 1}),
        chat_event("seven").replace(b"data: ", b"data:  "),
        b": comment\n" + chat_event("eight"),
        chat_event("nine").replace(b"\n\n", b"\r\n\r\n"),
        chat_event("ten"),
        b"data: [DONE]\n\n",
    ]
    fast, plain = SSEParser(), SSEParser()
    for parser_ in (fast, plain):
        parser_.feed_fields(first)
        parser_.feed_fields(second)
    slotted = 0
    for chunk in chunks:
        expected = plain.feed_fields(chunk)
        found = fast.feed_slot(chunk, framed)
        if found is None:
            assert fast.feed_fields(chunk) == expected, chunk
            continue
        slotted += 1
        ((event_type, data, _),) = expected
        assert event_type == "message"
        assert json.loads(data) == json.loads(chat_event(found)[6:])
    assert slotted == 3  # three, esc, ten; never the rest
    assert fast.feed_fields(b"data: end\n\n") == plain.feed_fields(b"data: end\n\n")
