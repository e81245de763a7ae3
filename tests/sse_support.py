"""A Responses text delta in OpenAI's shape, for the SSE short-cut tests."""

import json
from typing import Any


def responses_text(delta: Any, sequence: Any, padding: Any) -> str:
    """OpenAI's shape: a sequence number before the delta, random padding after it."""
    return json.dumps(
        {
            "type": "response.output_text.delta",
            "sequence_number": sequence,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": delta,
            "logprobs": [],
            "obfuscation": padding,
        },
        separators=(",", ":"),
    )
