"""Agents under test that we did not write (a command, an ACP agent, a Python callable),
and the run's gateway they reach their model through."""
