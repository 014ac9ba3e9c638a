"""One agent's settings as written in the config file (`agent.<name>`) or a Markdown agent file.

Both sources are validated by the same model, so a typo gets the same error wherever it was written.
Keys the schema does not know are provider options (as in `reasoningEffort: high`), and the deprecated
`tools: {name: bool}` map becomes permission rules.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentforge.config import ConfigError

Mode = Literal["primary", "subagent", "all"]


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    model: str | None = None  # "provider/model"
    variant: str | None = None
    prompt: str | None = None
    description: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    mode: Mode | None = None
    color: str | None = None
    hidden: bool | None = None
    steps: int | None = Field(default=None, ge=1)
    max_steps: int | None = Field(default=None, ge=1, alias="maxSteps")  # the older name of `steps`
    options: dict[str, Any] = Field(default_factory=dict)
    permission: Any = None
    tools: dict[str, bool] | None = None
    disable: bool = False

    @field_validator("model")
    @classmethod
    def _provider_and_model(cls, value: str | None) -> str | None:
        if value is not None and "/" not in value.strip("/"):
            raise ValueError(f"expected provider/model, got {value!r}")
        return value

    @property
    def step_limit(self) -> int | None:
        return self.steps if self.steps is not None else self.max_steps

    @property
    def provider_options(self) -> dict[str, Any]:
        """`options`, plus every key the schema does not know."""
        return {**(self.model_extra or {}), **self.options}

    @property
    def permission_value(self) -> Any:
        """`permission` in config form, with the deprecated `tools` map folded in after it."""
        if not self.tools:
            return self.permission
        from_tools = {name: "allow" if enabled else "deny" for name, enabled in self.tools.items()}
        if self.permission is None:
            return from_tools
        if isinstance(self.permission, str):
            return {"*": self.permission, **from_tools}
        if isinstance(self.permission, dict):
            return {**self.permission, **from_tools}
        return self.permission  # invalid either way: the rules parser names the problem


def parse_agent_config(raw: Any, where: str) -> AgentConfig:
    """Validate one entry; `where` names it in errors ("agent.review" or a file path)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: an agent must be an object, got {type(raw).__name__}")
    try:
        return AgentConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '<root>'}: {error['msg']}" for error in exc.errors()
        )
        raise ConfigError(f"{where}: invalid agent: {problems}") from None
