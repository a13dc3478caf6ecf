"""The embedded engine: a transformers model served in-process with batching, exact token IDs and logprobs."""

from harnessrl.engines.embedded.engine import EmbeddedEngine, EngineBusyError
from harnessrl.engines.embedded.outputs import EngineError, RequestHandle, RequestOutput
from harnessrl.engines.embedded.sampling import InvalidRequestError, SamplingParams
from harnessrl.engines.embedded.server import EngineServer, build_app, start_embedded, start_server

__all__ = [
    "EmbeddedEngine",
    "EngineBusyError",
    "EngineError",
    "EngineServer",
    "InvalidRequestError",
    "RequestHandle",
    "RequestOutput",
    "SamplingParams",
    "build_app",
    "start_embedded",
    "start_server",
]
