"""Reporting: failure reasons mined from records and artifacts, the terminal summary."""
