"""The command-line options and ini keys of pytest-agentbench, in one named group.

Each help text says what a user can act on; resolve.py resolves them (CLI beats ini
beats environment beats default). This module holds the run's own options (models,
limits, repairs, concurrency, the loop watch, the sandbox, the gate and the reports);
the options of the features a run turns on, each with its own page in docs/, are
``feature_options.py``'s.
"""

from __future__ import annotations

import pytest

# the closed sets only: options are read without --agentbench, which imports nothing heavy
from pytest_agentbench.config.feature_options import add_feature_options
from pytest_agentbench.core.choices import (
    FEEDBACK_LEVELS,
    GATE_ON,
    ISOLATION_MODES,
    REPAIR_MODES,
)


def add_options(parser: pytest.Parser) -> None:
    """Register every ``--agentbench*`` option and ``agentbench_*`` ini key."""
    group = parser.getgroup("agentbench", "benchmark LLMs and agents (pytest-agentbench)")
    group.addoption(
        "--agentbench",
        action="store_true",
        help="collect benchmark suite files (bench_*.toml|yaml|yml|json) and run every task "
        "as a test",
    )
    group.addoption(
        "--agentbench-model",
        metavar="PROVIDER/MODEL",
        action="append",
        help="model to benchmark: openai/<model> (Chat Completions), openai-responses/<model>, "
        "anthropic/<model>, openai-compat/<model> (with a base URL), or scripted (the "
        "offline default). Repeat it to run every task against each model; NAME=SPEC names "
        "one (ids, folders and the summary use the name)",
    )
    group.addoption(
        "--agentbench-epochs",
        metavar="K",
        type=int,
        help="run each task K times (one item per epoch, distinct seeds when a seed is set); "
        "overrides every suite's epochs",
    )
    group.addoption(
        "--agentbench-reducer",
        metavar="HOW",
        help="how a task's epochs become its score: mean (default), median, max, majority, "
        "pass@K or pass^K; overrides every suite's reducer",
    )
    group.addoption(
        "--agentbench-base-url",
        metavar="URL",
        help="API base URL, e.g. http://127.0.0.1:8000/v1 for a local vLLM or llama.cpp "
        "server (default: OPENAI_BASE_URL, else the provider's own)",
    )
    group.addoption(
        "--agentbench-out",
        metavar="DIR",
        help="folder for run results (default: agentbench-results)",
    )
    group.addoption(
        "--agentbench-timeout",
        metavar="SECONDS",
        type=float,
        help="wall-clock limit per task, repairs included (default: the suite's timeout_s, "
        "else 120); overrides every suite",
    )
    group.addoption(
        "--agentbench-max-tokens",
        metavar="N",
        type=int,
        help="output-token limit per generation; overrides every suite's max_tokens",
    )
    group.addoption(
        "--agentbench-repairs",
        metavar="N",
        type=int,
        help="verifier-feedback repair rounds per task, 0-10; overrides every suite's repairs",
    )
    group.addoption(
        "--agentbench-repair-mode",
        choices=REPAIR_MODES,
        help="conversation: feedback appended as a user turn (default); stateless: a fresh "
        "request with the task, the previous answer and the feedback",
    )
    group.addoption(
        "--agentbench-feedback",
        choices=FEEDBACK_LEVELS,
        help="how much of the verdict a repair round shows the model (default: names, the "
        "verifier's feedback sentence; none/counts reveal less, raw adds details)",
    )
    group.addoption(
        "--agentbench-concurrency",
        metavar="N",
        type=int,
        help="rollouts in flight per process (default 8; 1 = strictly serial). Items are "
        "still reported in pytest's order; rollouts run ahead of them",
    )
    group.addoption(
        "--agentbench-max-connections",
        metavar="M",
        type=int,
        help="requests in flight to the provider across the whole run, all xdist workers "
        "together (default: no shared bound); a 429/529 halves the bound for everyone, "
        "and it grows back after successes",
    )
    group.addoption(
        "--agentbench-rpm",
        metavar="R",
        type=float,
        help="requests per minute to the provider across the whole run, all xdist workers "
        "together, paced evenly (default: no bound)",
    )
    group.addoption(
        "--agentbench-shard",
        metavar="K/N",
        help="run only shard K of N: a stable partition of the tasks by a hash of suite "
        "name and task id, the same on every machine (merge the shards' runs with python -m "
        "pytest_agentbench merge)",
    )
    group.addoption(
        "--agentbench-loop-kill",
        metavar="PERCENT",
        type=int,
        help="kill a streaming generation whose confirmed loop scores at least PERCENT "
        "(default 80; 0 keeps detecting but never kills)",
    )
    group.addoption(
        "--agentbench-loop-kill-seconds",
        metavar="S",
        type=float,
        help="how long a loop must hold before the kill (default 10)",
    )
    group.addoption(
        "--agentbench-loop-kill-tokens",
        metavar="N",
        type=int,
        help="or how many more tokens (about 4 characters each) it may stream first, "
        "whichever comes first (default 1024)",
    )
    group.addoption(
        "--agentbench-sandbox",
        choices=ISOLATION_MODES,
        help="isolation for code and agent tasks: auto (the best this machine allows, the "
        "default), strict (refuse to run without bubblewrap: no network, read-only host), "
        "basic (process limits and a scrubbed environment only)",
    )
    group.addoption(
        "--agentbench-max-file-mb",
        metavar="MB",
        type=float,
        help="largest suite or dataset file read, in MB (default 64); a bigger one, or one "
        "that is not a regular file (a FIFO, a device), is a collection error",
    )
    group.addoption(
        "--agentbench-max-retries",
        metavar="N",
        type=int,
        help="retries of a failed request (429, 5xx, 529, broken connection; never after "
        "output arrived), with jittered backoff honouring Retry-After (default 3)",
    )
    group.addoption(
        "--agentbench-breaker",
        metavar="N",
        type=int,
        help="stop sending after N identical permanent errors in a row (401, 404 model not "
        "found, ...): the remaining tasks become harness errors naming the first (default 5; "
        "0 turns it off)",
    )
    group.addoption(
        "--agentbench-resume",
        metavar="RUN_DIR",
        nargs="?",
        const="latest",
        help="finish an earlier run in its own folder (default: the latest): tasks it "
        "finished under the same settings are reported from their result.json, not sent "
        "again",
    )
    group.addoption(
        "--agentbench-serial-server",
        action="store_true",
        help="the model's server serves one request at a time (llama-cpp-python, Ollama by "
        "default): time a request waits behind the run's others is not spent from its "
        "timeout from the first request on (without it, once the server is seen to queue)",
    )
    group.addoption(
        "--agentbench-retry-errors",
        action="store_true",
        help="with --agentbench-resume (implied): run the earlier run's harness errors again",
    )
    group.addoption(
        "--agentbench-min-score",
        metavar="X",
        type=float,
        help="gate on a score instead of on any failure: the run fails only when its score "
        "(or a suite's, with the suite's min_score) is below X (0-1) or a harness error "
        "happened",
    )
    group.addoption(
        "--agentbench-gate-on",
        choices=GATE_ON,
        help="what --agentbench-min-score and a suite's min_score compare: the score "
        "(point, the default) or the lower bound of its 95 %% interval (lower)",
    )
    group.addoption(
        "--agentbench-errors-as-failures",
        action="store_true",
        help="count harness errors as failed tasks (reward 0) in scores and the gate, "
        "instead of excluding them",
    )
    group.addoption(
        "--agentbench-limit",
        metavar="N|START:STOP",
        help="run only some tasks of each suite file, in file order: the first N, or the "
        "range START:STOP (0-based, STOP excluded: 10:50 is the 11th to the 50th)",
    )
    group.addoption(
        "--agentbench-sample",
        metavar="N",
        type=int,
        help="run a seeded random sample of N tasks of each suite file (after "
        "--agentbench-limit), kept in file order; the same seed gives the same tasks",
    )
    group.addoption(
        "--agentbench-sample-seed",
        metavar="S",
        type=int,
        help="seed of --agentbench-sample alone (default: the run's --agentbench-seed)",
    )
    group.addoption(
        "--agentbench-markdown",
        metavar="PATH",
        help="write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set)",
    )
    group.addoption(
        "--agentbench-otlp",
        metavar="URL",
        help="send the run's spans (run, tasks, model and tool calls; GenAI attributes) "
        "over OTLP/HTTP to URL (a collector, Phoenix, Langfuse ...); 'env' takes "
        "OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT (docs/interchange.md)",
    )
    group.addoption(
        "--agentbench-otlp-content",
        action="store_true",
        help="with --agentbench-otlp: send prompts, answers and tool output too (redacted)",
    )
    group.addoption(
        "--agentbench-baseline",
        metavar="RUN_DIR",
        help="compare this run with an earlier run folder on the tasks both ran: the "
        "difference with its paired interval and test, and the tasks that regressed",
    )
    group.addoption(
        "--agentbench-fail-on-regression",
        action="store_true",
        help="with --agentbench-baseline: fail the run when it is significantly worse than "
        "the baseline",
    )
    group.addoption(
        "--agentbench-margin",
        metavar="D",
        help="the difference that matters, e.g. 0.05: every comparison is then called better, "
        "worse, equivalent within ±D (two one-sided tests) or inconclusive",
    )
    group.addoption(
        "--agentbench-sequential",
        metavar="LOOKS",
        nargs="?",
        const=4,
        type=int,
        help="with exactly two sides (two models, or one and --agentbench-baseline): look "
        "at the paired comparison LOOKS times (default 4; O'Brien-Fleming bounds) and stop "
        "sending once it is decided; the tasks not sent are counted as saved",
    )
    group.addoption(
        "--agentbench-perturb",
        metavar="NAMES",
        help="also run seeded perturbed copies of each task, paired with the original: "
        "comma-separated shuffle, whitespace, case, distractor, paraphrase",
    )
    group.addoption(
        "--agentbench-seed",
        metavar="S",
        type=int,
        help="seed of the run's random choices, e.g. the perturbations (default 0)",
    )
    group.addoption(
        "--agentbench-html",
        metavar="PATH",
        help="where to write the HTML report (default: report.html in the run folder; "
        "written whenever a task ran)",
    )
    group.addoption(
        "--agentbench-no-stream",
        action="store_true",
        help="send non-streaming requests (streaming is the default)",
    )
    group.addoption(
        "--agentbench-controls",
        action="store_true",
        help="run every selected task's controls instead of a model: its known-good answer "
        "must pass, an empty answer, a refusal, another task's answer (and for code, "
        "None-returning and exit-0 code) must fail (docs/trust-your-suite.md)",
    )
    group.addoption(
        "--agentbench-canary",
        action="store_true",
        help="add one negative control per suite file to a model run (excluded from the "
        "scores); if one passes, the run is marked invalid and the gate fails",
    )
    add_feature_options(group, parser)
    parser.addini("agentbench_model", "model spec used when --agentbench-model is not given")
    parser.addini(
        "agentbench_models",
        "models to benchmark, one a line: NAME = SPEC [base_url=URL] [key_env=VAR] "
        "[temperature=T] [seed=N] ... (used when --agentbench-model is not given)",
        type="linelist",
    )
    parser.addini("agentbench_epochs", "runs of each task (overrides suites)")
    parser.addini("agentbench_reducer", "mean, median, max, majority, pass@K or pass^K")
    parser.addini(
        "agentbench_files",
        "glob patterns of suite file names (default: bench_*.toml bench_*.yaml bench_*.yml "
        "bench_*.json bench_*.py)",
        type="args",
    )
    parser.addini(
        "agentbench_base_url", "API base URL used when --agentbench-base-url is not given"
    )
    parser.addini("agentbench_out", "results folder used when --agentbench-out is not given")
    parser.addini("agentbench_otlp", "OTLP/HTTP URL for the run's spans (--agentbench-otlp)")
    parser.addini("agentbench_timeout", "per-task timeout in seconds")
    parser.addini("agentbench_max_tokens", "output-token limit per generation")
    parser.addini("agentbench_repairs", "repair rounds per task (overrides suites)")
    parser.addini("agentbench_repair_mode", "conversation or stateless")
    parser.addini("agentbench_feedback", "none, counts, names or raw")
    parser.addini("agentbench_min_score", "score gate for the run (0-1)")
    parser.addini("agentbench_gate_on", "point or lower: gate on the score or its CI's lower bound")
    parser.addini("agentbench_concurrency", "rollouts in flight per process")
    parser.addini("agentbench_max_connections", "requests in flight across the whole run")
    parser.addini("agentbench_rpm", "requests per minute across the whole run")
    parser.addini("agentbench_shard", "K/N: run only shard K of N")
    parser.addini("agentbench_max_retries", "retries of a failed request (default 3)")
    parser.addini(
        "agentbench_serial_server",
        "true: the model's server serves one request at a time (--agentbench-serial-server)",
        type="bool",
        default=False,
    )
    parser.addini(
        "agentbench_max_file_mb", "largest suite or dataset file read, in MB (default 64)"
    )
    parser.addini("agentbench_sandbox", "auto, strict or basic")
    parser.addini("agentbench_loop_kill", "loop kill threshold in percent (0: never kill)")
    parser.addini("agentbench_loop_kill_seconds", "seconds a loop holds before the kill")
    parser.addini("agentbench_loop_kill_tokens", "tokens a loop may stream before the kill")
    parser.addini("agentbench_breaker", "identical permanent errors before no more is sent")
    parser.addini("agentbench_limit", "N or START:STOP: the tasks of each suite file to run")
    parser.addini("agentbench_sample", "a seeded sample of N tasks of each suite file")
    parser.addini("agentbench_sample_seed", "seed of the sample alone (default: agentbench_seed)")
    parser.addini("agentbench_markdown", "path of a Markdown summary to write")
    parser.addini("agentbench_baseline", "earlier run folder to compare this run with")
    parser.addini("agentbench_margin", "equivalence margin of every comparison (0-1)")
    parser.addini("agentbench_perturb", "perturbations to run, comma-separated")
    parser.addini("agentbench_seed", "seed of the run's random choices (default 0)")
    parser.addini("agentbench_html", "path of the HTML report (default: the run folder's)")
