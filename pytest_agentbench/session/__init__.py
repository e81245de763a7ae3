"""One run under ``--agentbench``: its start and finish, collection into items, the
rollouts in flight, xdist control, the records reaching the run, the model fixture."""
