"""The options and ini keys of the features a run turns on, one group function each,
each feature with its page in docs/: cost, the cache and provider batches (cost.md),
sampling (sampling.md), the judge (judges.md), containers and the run-wide agent
(environments.md, agents-external.md). ``options.py`` registers them beside the run's
own options, in the same named group; both are read without --agentbench, so this
module, like it, imports only the closed word sets."""

from __future__ import annotations

import pytest

from pytest_agentbench.core.choices import REASONING_EFFORTS


def add_feature_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """Register every feature's options in ``group`` and its ini keys on ``parser``."""
    add_cost_options(group, parser)
    add_judge_options(group, parser)
    add_container_options(group, parser)
    add_sampling_options(group, parser)


def add_cost_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """Prices and the spending cap (docs/cost.md)."""
    group.addoption(
        "--agentbench-prices",
        metavar="FILE",
        help="a price file (TOML, or JSON): per model, USD per million tokens of input, "
        "output, cache_read, cache_write; wins over the built-in table (docs/cost.md)",
    )
    group.addoption(
        "--agentbench-max-cost",
        metavar="USD",
        type=float,
        help="stop sending once this run's spend plus the worst case of the requests in "
        "flight would pass USD; tasks not sent are reported as not run (reason budget) and "
        "--agentbench-resume finishes them later",
    )
    group.addoption(
        "--agentbench-cache",
        metavar="DIR",
        nargs="?",
        const=".agentbench-cache",
        help="answer a request identical to one already answered from its recorded reply, "
        "not the provider (default folder .agentbench-cache); docs/cost.md",
    )
    group.addoption(
        "--agentbench-cache-mode",
        choices=("read-write", "read", "write", "refresh"),
        help="read-write (default: replay hits, record misses), read (replay only), write "
        "(send everything, record what is new), refresh (send everything, record over)",
    )
    group.addoption(
        "--agentbench-dry-run",
        action="store_true",
        help="send nothing: print per suite x model the requests the run would send, its "
        "prompt tokens (estimated) and its cost from every task right first time to every "
        "repair used at max_tokens",
    )
    group.addoption(
        "--agentbench-batch",
        action="store_true",
        default=None,
        help="send each task's first request through the provider's batch API (OpenAI "
        "Batch, Anthropic Message Batches: half the price, answers within 24 h); later "
        "rounds and agent turns go live (docs/cost.md)",
    )
    group.addoption(
        "--agentbench-batch-poll",
        metavar="SECONDS",
        type=float,
        help="how often to ask the provider how the batch is going (default 30; 0.2 for "
        "the offline scripted provider)",
    )
    group.addoption(
        "--agentbench-batch-wait",
        metavar="SECONDS",
        type=float,
        help="the longest to wait for the batch (default 86400, the providers' 24 h "
        "window); then it is canceled and what it has not answered is sent live",
    )
    parser.addini("agentbench_batch", "send first-round requests through batch APIs", "bool")
    parser.addini("agentbench_batch_poll", "seconds between batch status checks")
    parser.addini("agentbench_batch_wait", "the longest wait for a batch, in seconds")
    parser.addini("agentbench_cache", "response cache folder (turns the cache on)")
    parser.addini("agentbench_cache_mode", "read-write, read, write or refresh")
    parser.addini("agentbench_prices", "price file (TOML or JSON), see docs/cost.md")
    parser.addini("agentbench_max_cost", "spending cap of a run in USD")


def add_sampling_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """The sampling settings (docs/sampling.md): a suite's or task's own ``sampling``
    table wins over these, and the command line over the ini file."""
    group.addoption(
        "--agentbench-temperature",
        metavar="T",
        type=float,
        help="sampling temperature, 0-2 (Anthropic: 0-1); a suite's or task's sampling wins",
    )
    group.addoption("--agentbench-top-p", metavar="P", type=float, help="nucleus sampling, 0-1")
    group.addoption(
        "--agentbench-top-k",
        metavar="K",
        type=int,
        help="top-k sampling (Anthropic only; for a local server use --agentbench-extra-body)",
    )
    group.addoption(
        "--agentbench-sampling-seed",
        metavar="N",
        type=int,
        help="the seed sent to the model (Chat Completions only); --agentbench-seed is the run's",
    )
    group.addoption(
        "--agentbench-stop",
        metavar="TEXT",
        action="append",
        help="a stop sequence (repeat for more; not on the Responses API)",
    )
    group.addoption(
        "--agentbench-reasoning-effort",
        choices=REASONING_EFFORTS,
        help="reasoning effort (Chat Completions and Responses)",
    )
    group.addoption(
        "--agentbench-thinking-budget",
        metavar="TOKENS",
        type=int,
        help="extended thinking budget in tokens (Anthropic only, at least 1024)",
    )
    group.addoption(
        "--agentbench-extra-body",
        metavar="JSON",
        help="a JSON object of provider-specific fields merged last into every request body",
    )
    parser.addini("agentbench_temperature", "sampling temperature")
    parser.addini("agentbench_top_p", "nucleus sampling, 0-1")
    parser.addini("agentbench_top_k", "top-k sampling (Anthropic)")
    parser.addini("agentbench_sampling_seed", "the seed sent to the model (Chat Completions)")
    parser.addini("agentbench_stop", "stop sequences, one a line", type="linelist")
    parser.addini("agentbench_reasoning_effort", "none, minimal, low, medium, high or xhigh")
    parser.addini("agentbench_thinking_budget", "thinking budget in tokens (Anthropic)")
    parser.addini("agentbench_extra_body", "JSON object merged last into every request body")


def add_judge_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """The judge verifier's options (docs/judges.md)."""
    group.addoption(
        "--agentbench-judge-model",
        metavar="SPEC",
        help="the model that grades judge tasks, over every suite's: SPEC [base_url=URL] "
        "[key_env=VAR] [temperature=T] [seed=N] ... (temperature 0 unless set)",
    )
    group.addoption(
        "--agentbench-judge-labels",
        metavar="FILE",
        help="people's labels of answers (JSONL or CSV: task id, answer, label) to "
        "calibrate the judge with",
    )
    group.addoption(
        "--agentbench-calibrate",
        action="store_true",
        help="run the judge on the labelled answers alone (no model under test) and report "
        "its agreement with the labels: accuracy, Cohen's kappa, sensitivity, specificity",
    )
    group.addoption(
        "--agentbench-judge-min-kappa",
        metavar="K",
        help="a judge whose calibration kappa is below K is marked 'judge not calibrated' "
        "and fails the gate",
    )
    group.addoption(
        "--agentbench-judge-timeout",
        metavar="S",
        help="the judge's own time limit for grading one answer, in seconds (default 300), "
        "over every suite's; a judge that does not finish is a judge error, never the "
        "task's timeout",
    )
    parser.addini(
        "agentbench_judge_model", "the judge model when --agentbench-judge-model is not given"
    )
    parser.addini("agentbench_judge_labels", "the judge's labelled answers (JSONL or CSV)")
    parser.addini("agentbench_judge_min_kappa", "the calibration kappa a judge must reach")
    parser.addini(
        "agentbench_judge_timeout",
        "the judge's time limit per answer in seconds when no suite sets judge.timeout_s",
    )


def add_container_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """The engine and the image map of tasks with an environment (config/container_options.py
    reads them; defined here so that nothing more is imported before --agentbench)."""
    group.addoption(
        "--agentbench-engine",
        choices=("podman", "docker"),
        help="the container engine of tasks with an environment (Harbor tasks): podman or "
        "docker (default: podman if it answers, else docker; CONTAINER_HOST / DOCKER_HOST "
        "reach a remote one)",
    )
    group.addoption(
        "--agentbench-image-map",
        action="append",
        metavar="NAME=IMAGE",
        help="build with IMAGE wherever a task's Dockerfile says FROM NAME (or its "
        "docker_image names NAME): how an air-gapped machine builds every task; repeatable",
    )
    group.addoption(
        "--agentbench-agent",
        metavar="FILE",
        help="the agent under test of every agent-mode task naming none of its own "
        "(Harbor tasks included): a TOML file holding one agent table, as a suite's "
        "agent (docs/agents-external.md)",
    )
    parser.addini("agentbench_agent", "a TOML file holding the run-wide agent under test")
    parser.addini("agentbench_engine", "podman or docker (tasks with an environment)")
    parser.addini(
        "agentbench_image_map", "NAME = IMAGE lines: FROM names mapped to local images",
        type="linelist",
    )  # fmt: skip
