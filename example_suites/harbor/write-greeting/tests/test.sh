#!/bin/bash
# Harbor's contract: write a reward to /logs/verifier/reward.txt (here with a CTRF
# report beside it, which agentbench mines for the failure line).
python3 /tests/check.py /app/greeting.txt "hello, harbor"
