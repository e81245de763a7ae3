"""Containers for rollouts, through a container engine's own CLI (Podman or Docker, local
or remote): the engine (engine.py), images built once per content hash (images.py), one
container per rollout (container.py), who owns it and the reaper (owners.py), what its
limits came to (limits.py), and the way from a container without a network to the run's
gateway (gateway.py).

This layer sits below ``sandbox`` and above ``models``: it imports only ``core``, ``errors``
and the standard library. Nothing here is imported until a run asks for a container.
"""
