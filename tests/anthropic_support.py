"""What test_anthropic.py and test_anthropic_wire.py share: the key, a reply with tool
calls and thinking, and declared usage with a large cache read."""

from __future__ import annotations

KEY = "test-anthropic-key-do-not-leak-5678"
CACHED = {
    "input_tokens": 12,
    "cache_creation_input_tokens": 300,
    "cache_read_input_tokens": 44000,
    "output_tokens": 9,
}
TOOL_REPLY = {
    "text": "let me check",
    "thinking": "the user wants weather",
    "tool_calls": [
        {"name": "weather", "arguments": {"city": "Paris", "unit": "celsius"}},
        {"name": "clock", "arguments": "{not json", "id": "toolu_given"},
    ],
}
