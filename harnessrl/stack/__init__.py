"""The run's stack, assembled in one place: engine, gateway and trainer(s) over one store.

``assemble.py``: ``Stack.start`` (what ``train``, ``sft``, ``collect`` and production training stand on) and
``Stack.close``; ``trainer.py``: the one trainer; ``policies.py``: several policies (one adapter each on
one base, the gateway's routes); ``vllm.py``: vLLM engines (start, publisher, the gateway's overrides).
"""

from harnessrl.stack.assemble import Stack

__all__ = ["Stack"]
