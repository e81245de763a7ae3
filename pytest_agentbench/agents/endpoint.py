"""What an agent under test is handed to reach its model: one base URL and one stand-in
key per task. The gateway makes them; the agent runners hand them to the agent."""

from __future__ import annotations

from pytest_agentbench.core.fastclass import dataclass


@dataclass(frozen=True, slots=True)
class AgentEndpoint:
    """One task's way to its model. ``base_url`` has no trailing slash; the three wire
    protocols hang under it (``/v1/chat/completions``, ``/v1/responses``,
    ``/v1/messages``). ``key`` is valid for this task at this gateway only: it is never
    the real credential."""

    base_url: str
    key: str

    def environment(self) -> dict[str, str]:
        """The variables the common SDKs and CLIs read for their endpoint and key."""
        return {
            "OPENAI_BASE_URL": f"{self.base_url}/v1",
            "OPENAI_API_KEY": self.key,
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": self.key,
            "AGENTBENCH_BASE_URL": self.base_url,
            "AGENTBENCH_API_KEY": self.key,
        }
