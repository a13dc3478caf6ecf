"""Settings of the token-exact (``gateway``) render mode."""

from __future__ import annotations

from pydantic import Field

from harnessrl.config_base import ConfigSection


class RenderConfig(ConfigSection):
    """How the gateway renders chat requests to token IDs itself (render_mode ``gateway``)."""

    tokenizer: str = Field(
        default="smollm2",
        description=(
            "Whose tokenizer and chat template render prompts: a model spec as the engine takes it "
            "('smollm2', 'tiny', a transformers folder, a .gguf file). Must match the engine's model."
        ),
    )
    chat_template: str = Field(
        default="auto",
        description=(
            "'auto': the model's template, or the builtin 'hermes-chatml' when the model's ChatML template "
            "ignores tools (SmolLM2); 'model': always the model's own; a builtin name ('hermes-chatml'); a "
            "path to a .jinja file; or a literal Jinja template."
        ),
    )
    tool_parser: str = Field(
        default="auto",
        description="How completions become tool calls: 'auto' (from the template), 'hermes' (Qwen2.5/3 JSON), "
        "'qwen3_coder' (Qwen3-Coder/Qwen3.5 XML), 'llama3_json' or 'none'.",
    )
    reasoning: str = Field(
        default="auto",
        description="Whether the text the model writes between <think> and </think> becomes the message's "
        "reasoning_content (Anthropic thinking blocks, Responses reasoning items) instead of content: 'auto' "
        "(when the template knows </think>, as Qwen3's does), 'think' or 'none'.",
    )
    max_history_tokens: int = Field(
        default=4_000_000,
        ge=1,
        description=(
            "Tokens of an open rollout's render history (its calls' new prompt tokens and completions, kept to "
            "reuse their exact IDs); a call past it is refused (400 render_history_budget)."
        ),
    )
    max_prefix_attempts: int = Field(
        default=4,
        ge=1,
        description=(
            "How many matching earlier calls (longest first) to try before re-rendering from scratch when the "
            "template renders earlier turns differently once later turns are added."
        ),
    )
