"""The user's glue for this example: the OpenHands SDK agent, unmodified, on the task's prompt.

What a user of the SDK writes anyway: an ``LLM`` (the SDK's documented model settings: ``model``,
``base_url``, ``api_key``; LiteLLM underneath, so ``openai/<name>`` means "an OpenAI-compatible server"),
the default agent with its default tools (``get_default_agent``: terminal, file editor, task tracker; no
browser in ``cli_mode``), and a ``Conversation`` in the current directory. The only harnessrl part is where
the settings come from: the rollout's gateway route and key. Runs in .venv-openhands (scripts/openhands.sh),
started by run.sh. A Python >= 3.12 file: harnessrl's own interpreter never imports it.
"""

import os
import sys

from openhands.sdk import LLM, Conversation
from openhands.tools.preset.default import get_default_agent


def main() -> int:
    llm = LLM(
        model=f"openai/{os.environ.get('HARNESSRL_MODEL') or 'policy'}",  # any name: the gateway serves the policy
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        usage_id="agent",
    )
    agent = get_default_agent(llm=llm, cli_mode=True)
    conversation = Conversation(agent=agent, workspace=os.getcwd(),
                                max_iteration_per_run=int(os.environ.get("OPENHANDS_MAX_ITERATIONS", "30")))
    conversation.send_message(os.environ["HARNESSRL_TASK_PROMPT"])
    conversation.run()
    status = conversation.state.execution_status.value
    print(f"openhands: conversation {status}", file=sys.stderr)
    # Exit non-zero only when OpenHands itself failed; a stuck agent or a wrong fix is the model's doing.
    return 1 if status == "error" else 0


if __name__ == "__main__":
    sys.exit(main())
