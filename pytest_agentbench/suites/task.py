"""The Task record: one benchmark case, fully resolved from its suite's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from pytest_agentbench.core.choices import FEEDBACK_LEVELS as FEEDBACK_LEVELS
from pytest_agentbench.core.choices import REPAIR_MODES as REPAIR_MODES
from pytest_agentbench.core.choices import FeedbackLevel as FeedbackLevel
from pytest_agentbench.core.choices import RepairMode as RepairMode
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.sampling import Sampling

if TYPE_CHECKING:  # a task's container: its module when a suite or a Harbor folder names one
    from pytest_agentbench.suites.environment import TaskEnvironment

#: The tools an agent task gets unless it names its own (the built-in ones).
DEFAULT_TOOLS = ("bash", "read_file", "write_file", "list_files")
#: The verifier kind of a task whose suite and table name none.
DEFAULT_VERIFIER = "exact"

#: Scripted replies as written in a suite (strings or tables): one per attempt, or one
#: per model call of an agent task.
Replies = tuple[JsonValue, ...]

#: How a task's attempts are generated (suite ``mode``).
TaskMode = Literal["answer", "agent"]
TASK_MODES: tuple[TaskMode, ...] = get_args(TaskMode)
#: The verifier kind of every Harbor task (suites/harbor.py, verifiers/harbor.py); here,
#: not there, so a run without Harbor folders never imports their reader.
HARBOR = "harbor"
#: What a control expects of its verdict: ``pass`` (positive) or ``fail`` (negative).
ControlExpect = Literal["pass", "fail"]
CONTROL_EXPECTS: tuple[ControlExpect, ...] = get_args(ControlExpect)
#: How a calibration item's control name starts (``label-<line>``).
CALIBRATION_PREFIX = "label-"


@dataclass(frozen=True)
class VerifierConfig:
    """Which verifier judges a task, and its options (the suite's table minus ``kind``)."""

    kind: str
    options: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentConfig:
    """The agent under test of a task (suite ``agent``): its ``kind`` (``command``, …)
    and its options (the table minus ``kind``), read by that kind's runner in agents/.
    A task without one is run by the built-in loop."""

    kind: str
    options: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Control:
    """A control run of a task: an answer whose verdict is known before the verifier
    runs. ``expect`` is ``pass`` (the positive control: a known-good answer) or ``fail``
    (a negative one); ``source`` says where the answer came from; ``canary`` marks a
    negative control added to an ordinary model run."""

    name: str
    expect: ControlExpect
    source: str
    canary: bool = False
    #: a person's label of the answer, on a calibration run of a judge (the answer is a
    #: labelled one: suites/calibration.py); None for a control
    label: JsonValue = None

    @property
    def calibration(self) -> bool:
        """True for a labelled answer judged to calibrate a judge (never a control)."""
        return self.name.startswith(CALIBRATION_PREFIX)


@dataclass(frozen=True, slots=True)
class Task:
    """One benchmark case with every suite default applied.

    ``prompt`` is the rendered user message (template filled in); ``scripted`` holds the
    scripted model's replies, one per attempt, as written in the suite (strings or tables).
    ``repair_mode`` is ``conversation`` (feedback appended as a user turn) or ``stateless``
    (a fresh request with the task, the previous answer and the feedback); ``feedback`` is
    how much of the verdict a repair round shows: ``none``, ``counts``, ``names``, ``raw``.
    ``min_score`` is the suite's score gate (suite-level only), None when not set.
    ``timeout_s`` and ``max_tokens`` are None when neither task nor suite set them, so the
    run's settings decide.
    ``files`` (relative path → text) and ``files_dir`` (a directory, copied first) seed the
    workspace of code tasks; the task's own entries win over the suite's.
    ``mode`` is ``answer`` (one generation per attempt) or ``agent`` (each attempt is a
    tool-calling loop of at most ``max_turns`` model calls, offered ``tools`` by name, each
    tool result capped at ``max_tool_output`` characters).
    ``oracle`` is the task's known-good answer as scripted replies (one for a plain
    answer, one per model call for an agent task); empty when the suite gives none.
    ``control`` is set on the copy of a task that a control runs (suites/controls.py):
    its ``scripted`` replies are then the control's answer.
    ``sampling`` holds the task's sampling settings over the suite's (the run's settings
    fill the rest before it runs).
    """

    suite: str
    id: str
    index: int
    path: Path
    input: str
    prompt: str
    target: JsonValue = None
    system: str | None = None
    verifier: VerifierConfig = field(default_factory=lambda: VerifierConfig("exact"))
    choices: tuple[str, ...] = ()
    repairs: int = 0
    repair_mode: RepairMode = "conversation"
    feedback: FeedbackLevel = "names"
    timeout_s: float | None = None
    max_tokens: int | None = None
    pass_threshold: float = 1.0
    min_score: float | None = None
    scripted: Replies = ()
    vars: Mapping[str, JsonValue] = field(default_factory=dict)
    marks: tuple[str, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)
    files_dir: Path | None = None
    mode: TaskMode = "answer"
    max_turns: int = 20
    tools: tuple[str, ...] = DEFAULT_TOOLS
    #: The agent under test (None: the built-in loop, or a plain answer).
    agent: AgentConfig | None = None
    max_tool_output: int = 10_000
    oracle: Replies = ()
    control: Control | None = None
    sampling: Sampling = field(default_factory=Sampling)
    #: The scripted model's replies by model name (a model not named gets ``scripted``).
    scripted_by_model: Mapping[str, Replies] = field(default_factory=dict)
    #: Runs of the task (``epochs``) and how their rewards become its score (``reducer``).
    epochs: int = 1
    reducer: str = "mean"
    #: Set on the copy one item runs: the model's name ("" in a one-model run) and the
    #: epoch (0 when the task runs once).
    model: str = ""
    epoch: int = 0
    #: Set on a perturbed copy (suites/perturb.py): its perturbation, the id of the task
    #: it was made from, and the seed it was made with.
    perturbation: str | None = None
    original_id: str | None = None
    perturbation_seed: int | None = None
    #: The container the task's rollout works in (None: the host's sandbox); a Harbor
    #: task always has one (suites/harbor.py).
    environment: TaskEnvironment | None = None

    @property
    def key(self) -> str:
        """A run-wide unique key: the suite file and the task id (and the item's model and
        epoch, when it runs against several or more than once, and the control)."""
        key = f"{self.path.as_posix()}::{self.id}"
        if self.model:
            key += f"[{self.model}]"
        if self.epoch:
            key += f"#{self.epoch}"
        return key if self.control is None else f"{key}::control:{self.control.name}"

    def for_item(self, model: str, epoch: int, name: str = "") -> Task:
        """The task one item runs: ``model`` ("" for the run's only model) and ``epoch``
        (0 when the task runs once); the scripted replies are those of the model called
        ``name`` (default ``model``; the only model has a name too). The task itself when
        nothing differs (one model, run once), else a copy."""
        scripted = tuple(self.scripted_by_model.get(name or model, self.scripted))
        if model == self.model and epoch == self.epoch and scripted == self.scripted:
            return self  # the run's only model, once: the task itself, not a copy of it
        return replace(self, model=model, epoch=epoch, scripted=scripted)
