"""``harnessrl gateway``: serve the recording gateway in front of one or more engines.

``harnessrl gateway --engine http://127.0.0.1:8000/v1 --db sqlite:///harnessrl.db``. Flags override the
``[gateway]`` / ``[store]`` sections of ``--config FILE.toml``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

log = logging.getLogger("harnessrl")


def add_parser(sub: Any) -> None:
    g = sub.add_parser("gateway", help="serve the recording gateway in front of one or more engines")
    g.add_argument("--engine", action="append", default=[],
                   help="engine base URL speaking vLLM's OpenAI dialect (repeatable), or 'embedded'")
    g.add_argument("--db", help="store URL (default sqlite:///harnessrl.db)")
    g.add_argument("--host", help="interface to listen on (default 127.0.0.1)")
    g.add_argument("--port", type=int, help="port (default 8400)")
    g.add_argument("--config", help="TOML file with [gateway] and [store] sections")
    g.add_argument("--model-name", help="name /v1/models lists for the served policy")
    g.add_argument("--render-mode", choices=["engine", "gateway"], help="who applies the chat template")
    g.add_argument("--public-url", help="URL harnesses reach the gateway at (for rollout base_url)")
    g.add_argument("--mode", choices=["training", "production"],
                   help="production: also serve deployed applications under /p/<deployment>/v1 ([production])")
    g.set_defaults(func=run)


def _start_embedded(engine: Any) -> str:
    """Load the embedded engine (``[engine]`` section of the config) and serve it on loopback."""
    from harnessrl.engines.embedded.server import start_embedded

    server = start_embedded(engine.model_copy(update={"kind": "embedded", "urls": []}))
    return server.base_url


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from harnessrl.config import ConfigError, load_config
    from harnessrl.engines.url_check import check_engine_urls_or_exit
    from harnessrl.gateway import Gateway
    from harnessrl.gateway.app import SERVE_OPTIONS
    from harnessrl.gateway.serving_gc import tune_for_serving
    from harnessrl.production.plugin import gateway_plugins
    from harnessrl.store import open_store
    from harnessrl.ui import mount_dashboard

    flags = {key: getattr(args, key) for key in ("host", "port", "model_name", "render_mode", "public_url", "mode")
             if getattr(args, key) is not None}
    if args.engine:
        flags["engines"] = args.engine
    try:
        harness = load_config(args.config, {"gateway": flags}, gateway_alone=True)
    except ConfigError as exc:  # the message names the file and the bad key
        raise SystemExit(str(exc)) from None
    config = harness.gateway
    if "embedded" in config.engines and "tokenizer" not in config.render.model_fields_set:
        # the gateway decodes stored token IDs (to redact secrets) with the served model's tokenizer
        config.render = config.render.model_copy(update={"tokenizer": harness.engine.model})
    config.engines = [_start_embedded(harness.engine) if e == "embedded" else e for e in config.engines]
    config.engines = check_engine_urls_or_exit(config.engines)  # with or without /v1: engines/url_check.py
    if not config.engines:
        raise SystemExit("no engine configured: pass --engine http://HOST:PORT/v1 (repeatable) or --engine embedded")
    db = args.db or harness.store.url or "sqlite:///harnessrl.db"
    store = open_store(db)
    gateway = Gateway(store, config, plugins=gateway_plugins(config, harness.production))
    mount_dashboard(gateway)
    if gateway.generated_admin_token:
        # Printed to the terminal only (never logged or stored): the controller needs it to create rollouts.
        print(f"harnessrl gateway admin token: {gateway.admin_token}", file=sys.stderr, flush=True)
    log.info("gateway on http://%s:%d -> %s, recording to %s", config.host, config.port,
             ", ".join(config.engines), db)
    tune_for_serving()  # startup is done: its objects frozen, young collections rarer (serving_gc.py)
    try:
        uvicorn.run(gateway.app, host=config.host, port=config.port, log_level=args.log_level.lower(),
                    **SERVE_OPTIONS)
    finally:
        store.close()
    return 0
