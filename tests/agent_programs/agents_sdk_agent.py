"""A coding agent written with the OpenAI Agents SDK (PyPI ``openai-agents``), for the
real-agent tests: one tool, ``run_shell``, run in the working folder; its model through
Chat Completions at ``$OPENAI_BASE_URL`` with ``$OPENAI_API_KEY`` (the gateway's).

As a command: ``python agents_sdk_agent.py PROMPT`` (``--resume PROMPT`` continues the
conversation kept in ``$HOME/agents-sdk-history.json``). As a ``python`` agent:
``agents_sdk_agent:run``, called with the task, the workspace, the gateway's base URL and
the stand-in key.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

set_tracing_disabled(True)  # no trace upload: the gateway is the only address it may call


@function_tool
def run_shell(command: str) -> str:
    """Run a shell command in the working folder; returns its output and exit status."""
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
    return f"{done.stdout}{done.stderr}[exit {done.returncode}]"


async def work(prompt: str, base_url: str, key: str, history: Path, resume: bool) -> str:
    client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0)
    model = OpenAIChatCompletionsModel(model="task-model", openai_client=client)
    agent = Agent(
        name="coder",
        instructions="You work in the current folder with run_shell.",
        tools=[run_shell],
        model=model,
        # a streamed Chat Completion reports usage only when asked (stream_options)
        model_settings=ModelSettings(include_usage=True),
    )
    earlier = json.loads(history.read_text()) if resume and history.exists() else []
    # streamed, as interactive agents do (the gateway watches a stream for loops as it comes)
    result = Runner.run_streamed(agent, [*earlier, {"role": "user", "content": prompt}])
    async for _ in result.stream_events():
        pass
    history.write_text(json.dumps(result.to_input_list()))
    return str(result.final_output)


def run(task: object, workspace: Path, base_url: str, key: str) -> str:
    """The ``python`` agent kind's entry: a repair round (``task.feedback``) continues."""
    feedback = getattr(task, "feedback", None)
    prompt = feedback if feedback else str(getattr(task, "prompt", ""))
    history = Path(os.environ["HOME"]) / "agents-sdk-history.json"
    return asyncio.run(work(prompt, base_url, key, history, resume=bool(feedback)))


if __name__ == "__main__":
    resume = sys.argv[1] == "--resume"
    base = os.environ["OPENAI_BASE_URL"].removesuffix("/v1")
    history = Path(os.environ["HOME"]) / "agents-sdk-history.json"
    answer = asyncio.run(
        work(sys.argv[-1], base, os.environ["OPENAI_API_KEY"], history, resume=resume)
    )
    print(answer)
