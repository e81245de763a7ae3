"""The bottom layer: the shared types every layer may import.

Records of a rollout (``records``), token usage (``usage``) and stream events
(``stream``). These modules import only each other, ``errors`` and the standard library,
so importing them is cheap and can never pull a layer above them in (tests/package/test_layers.py
checks it; docs/architecture.md shows the layers).
"""
