"""The closed sets of words an option or a suite key may take, each one ``Literal`` with
its runtime tuple (``get_args``). Standard library only: the options read these at
start-up even without ``--agentbench``, which must import nothing heavy. The layers that
use a set import it from here (or from the module that re-exports it)."""

from __future__ import annotations

from typing import Literal, get_args

#: How a repair round asks again (suite ``repair_mode``, ``--agentbench-repair-mode``).
RepairMode = Literal["conversation", "stateless"]
REPAIR_MODES: tuple[RepairMode, ...] = get_args(RepairMode)

#: How much of a verdict a repair round shows (suite ``feedback``, ``--agentbench-feedback``).
FeedbackLevel = Literal["none", "counts", "names", "raw"]
FEEDBACK_LEVELS: tuple[FeedbackLevel, ...] = get_args(FeedbackLevel)

#: ``auto`` takes the best level available; ``strict`` refuses to run without ``strong``;
#: ``basic`` never uses a namespace tool (for comparison, or where namespaces misbehave).
Isolation = Literal["auto", "strict", "basic"]
ISOLATION_MODES: tuple[Isolation, ...] = get_args(Isolation)

#: What the score gate compares: the point estimate or its 95 % interval's lower bound.
GateOn = Literal["point", "lower"]
GATE_ON: tuple[GateOn, ...] = get_args(GateOn)

#: What ``reasoning_effort`` may say (the OpenAI values).
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
REASONING_EFFORTS: tuple[ReasoningEffort, ...] = get_args(ReasoningEffort)
