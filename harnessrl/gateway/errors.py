"""Gateway errors, each rendered in the OpenAI error shape so that standard clients show them properly.

The status codes are chosen so that the official clients do not retry what cannot succeed: budget and
closed-rollout errors are non-retryable 4xx, only "engine unavailable" / "paused too long" are 503.
"""

from __future__ import annotations

import orjson
from starlette.responses import Response


class GatewayError(Exception):
    """An error the gateway answers with ``{"error": {"message", "type", "code"}}``."""

    status = 400
    type = "invalid_request_error"
    code: str | None = None

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code
        if type is not None:
            self.type = type

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "code": self.code}}

    def response(self) -> Response:
        return error_response(self.status, self.message, self.type, self.code)


class BadRequest(GatewayError):
    status, code = 400, "bad_request"


class Unauthorized(GatewayError):
    status, type, code = 401, "authentication_error", "missing_api_key"


class Forbidden(GatewayError):
    status, type, code = 403, "permission_error", "wrong_api_key"


class NotFoundError(GatewayError):
    status, code = 404, "not_found"


class RolloutClosedError(GatewayError):
    """The rollout is finished; 410 so that clients do not retry."""

    status, code = 410, "rollout_closed"


class PayloadTooLarge(GatewayError):
    status, code = 413, "body_too_large"


class LimitExceeded(GatewayError):
    """A per-call or per-rollout budget; 400 (not 429) because retrying cannot help."""

    status, code = 400, "limit_exceeded"


class NotImplementedMode(GatewayError):
    status, type, code = 501, "not_implemented", "render_mode_unavailable"


class EngineUnavailable(GatewayError):
    status, type, code = 503, "engine_unavailable", "no_engine_available"


class StoreUnavailable(GatewayError):
    """The store refused the write (disk full, database down): the call is not recorded, so not answered.

    503 so that clients retry: the gateway records again by itself once the store accepts writes."""

    status, type, code = 503, "store_unavailable", "store_unavailable"


class PauseTimeout(GatewayError):
    status, type, code = 503, "gateway_paused", "pause_timeout"


class UpstreamError(GatewayError):
    """The engine answered with an error; its status and message are passed through."""

    type = "upstream_error"


def error_response(status: int, message: str, type: str = "invalid_request_error",
                   code: str | None = None) -> Response:
    body = {"error": {"message": message, "type": type, "code": code}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")
