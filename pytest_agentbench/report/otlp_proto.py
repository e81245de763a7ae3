"""OTLP's protobuf encoding of an export request given in its JSON form (the form
report/otlp_spans.py makes), for ``http/protobuf``: OTLP/HTTP's default protocol, and the
only one some backends take (Arize Phoenix answers JSON with 415).

Written against the field numbers of opentelemetry-proto's ``trace.proto``,
``common.proto`` and ``resource.proto`` (v1): only the fields our spans use.
``tests/report/test_otlp.py`` decodes the bytes with the official protobuf classes where
they are installed and compares them with the JSON form.
"""

from __future__ import annotations

import struct

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue, as_list, as_object

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as two's complement, like protobuf
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _len(field: int, payload: bytes) -> bytes:
    return _key(field, _LEN) + _varint(len(payload)) + payload


def _str(field: int, text: str) -> bytes:
    return _len(field, text.encode("utf-8", "surrogatepass"))


def _fixed64(field: int, value: int) -> bytes:
    return _key(field, _I64) + struct.pack("<Q", value)


def _any_value(value: JsonObject) -> bytes:
    if "stringValue" in value:
        return _str(1, str(value["stringValue"]))
    if "boolValue" in value:
        return _key(2, _VARINT) + _varint(1 if value["boolValue"] is True else 0)
    if "intValue" in value:
        return _key(3, _VARINT) + _varint(int(str(value["intValue"])))
    if "doubleValue" in value:
        number = value["doubleValue"]
        return _key(4, _I64) + struct.pack(
            "<d", float(number if isinstance(number, int | float) else 0)
        )
    if "arrayValue" in value:
        items = as_list(as_object(value["arrayValue"]).get("values"))
        return _len(5, b"".join(_len(1, _any_value(as_object(v))) for v in items))
    return b""


def _attributes(field: int, attrs: JsonValue | None) -> bytes:
    out = b""
    for one in map(as_object, as_list(attrs)):
        pair = _str(1, str(one.get("key"))) + _len(2, _any_value(as_object(one.get("value"))))
        out += _len(field, pair)
    return out


def _span(span: JsonObject) -> bytes:
    out = _len(1, bytes.fromhex(str(span["traceId"]))) + _len(2, bytes.fromhex(str(span["spanId"])))
    if span.get("parentSpanId"):
        out += _len(4, bytes.fromhex(str(span["parentSpanId"])))
    out += _str(5, str(span.get("name", "")))
    kind = span.get("kind")
    if isinstance(kind, int) and kind:
        out += _key(6, _VARINT) + _varint(kind)
    out += _fixed64(7, int(str(span.get("startTimeUnixNano", 0))))
    out += _fixed64(8, int(str(span.get("endTimeUnixNano", 0))))
    out += _attributes(9, span.get("attributes"))
    for event in map(as_object, as_list(span.get("events"))):
        body = _fixed64(1, int(str(event.get("timeUnixNano", 0)))) + _str(
            2, str(event.get("name", ""))
        )
        out += _len(11, body + _attributes(3, event.get("attributes")))
    status = as_object(span.get("status"))
    body = b""
    if status.get("message"):
        body += _str(2, str(status["message"]))
    code = status.get("code")
    if isinstance(code, int) and code:
        body += _key(3, _VARINT) + _varint(code)
    return out + _len(15, body)


def encode_request(request: JsonObject) -> bytes:
    """An ExportTraceServiceRequest in protobuf from its OTLP JSON form."""
    out = b""
    for resource_spans in map(as_object, as_list(request.get("resourceSpans"))):
        resource = _attributes(1, as_object(resource_spans.get("resource")).get("attributes"))
        body = _len(1, resource)
        for scope_spans in map(as_object, as_list(resource_spans.get("scopeSpans"))):
            scope = as_object(scope_spans.get("scope"))
            inner = _len(
                1, _str(1, str(scope.get("name", ""))) + _str(2, str(scope.get("version", "")))
            )
            for one in map(as_object, as_list(scope_spans.get("spans"))):
                inner += _len(2, _span(one))
            body += _len(2, inner)
        out += _len(1, body)
    return out
