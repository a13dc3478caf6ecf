"""The processes of one machine, wired together: engine, gateway, trainer over one store.

``Stack.start`` is what ``harnessrl train`` and ``harnessrl collect`` stand on. With the embedded engine
everything lives in this process: the engine serves HTTP on a loopback port, the gateway forwards to it,
and the trainer publishes new weights straight into the engine (a few MB for a LoRA adapter). With
engine URLs (vLLM and friends) the trainer publishes to a folder instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessrl.config import HarnessConfig
from harnessrl.engines.url_check import check_engine_urls
from harnessrl.gateway import Gateway, GatewayServer
from harnessrl.production.plugin import gateway_plugins
from harnessrl.stack.trainer import make_trainer
from harnessrl.store import Store
from harnessrl.ui import mount_dashboard

log = logging.getLogger(__name__)


@dataclass
class Stack:
    config: HarnessConfig
    store: Store
    gateway: GatewayServer
    engine: Any = None  # EmbeddedEngine when in-process
    engine_server: Any = None
    trainer: Any = None
    tokenizer: Any = None
    _closed: bool = field(default=False, repr=False)

    @property
    def gateway_url(self) -> str:
        return self.gateway.url

    @property
    def admin_token(self) -> str:
        return self.gateway.gateway.admin_token

    @classmethod
    def start(
        cls,
        config: HarnessConfig,
        store: Store,
        *,
        run_id: str | None,
        train: bool,
        checkpoint: Path | None = None,
    ) -> Stack:
        """Start the engine, the gateway and (when ``train``) the trainer; load ``checkpoint`` if given."""
        engine: Any = None
        engine_server: Any = None  # the embedded engine's server, or the vLLM servers
        trainer: Any = None
        tokenizer: Any = None
        if config.engine.kind != "embedded":  # an engine URL with or without /v1: engines/url_check.py
            config.engine.urls = check_engine_urls(config.engine.urls)
        engines = list(config.engine.urls)
        if config.engine.kind == "embedded":
            if config.gateway.images == "pass":  # it would drop them: refused before anything starts
                raise ValueError('[gateway] images = "pass" needs an engine that serves a vision-language model '
                                 '(vLLM); the embedded engine reads text only: leave images = "refuse"')
            from harnessrl.engines.embedded import EmbeddedEngine, start_server
            from harnessrl.models import load_model

            model, tokenizer = load_model(config.engine.model, dtype=config.engine.embedded_dtype())
            engine = EmbeddedEngine(model, tokenizer, config.engine)
            if config.policies:  # several policies: one adapter each on this base
                from harnessrl.stack.policies import trained

                engine.register_adapters(trained(config))
            engine_server = start_server(engine, owns_engine=True)
            engines = [engine_server.base_url]
        elif config.engine.kind == "vllm":
            from harnessrl.stack.vllm import start_engine

            engine_server = start_engine(config)  # launched or attached vLLM servers
            engines = engine_server.urls
        elif config.engine.kind == "sglang":
            from harnessrl.engines.sglang import check_sglang

            check_sglang(config.engine, config.gateway.render_mode, train=train or checkpoint is not None)
        if not engines:
            raise ValueError('[engine] lists no urls: set kind = "embedded" or urls = ["http://host:port/v1"]')
        if (train or checkpoint is not None) and config.policies:
            from harnessrl.stack.policies import make_policy_trainers

            trainer = make_policy_trainers(config, store, run_id, engine, tokenizer,
                                           vllm=engine_server if config.engine.kind == "vllm" else None)
            if checkpoint is not None:
                trainer.load_checkpoint(checkpoint)
        elif train or checkpoint is not None:
            trainer = make_trainer(config, store, run_id, engine, tokenizer,
                                    vllm=engine_server if config.engine.kind == "vllm" else None)
            if checkpoint is not None:
                trainer.load_checkpoint(checkpoint)
                if engine is not None and trainer.policy_version > 0:
                    from harnessrl.weights.publish import trainable_update

                    engine.update_weights(**trainable_update(trainer.model), version=trainer.policy_version)
                log.info("loaded checkpoint %s (step %d, policy version %d)", checkpoint, trainer.step_count,
                         trainer.policy_version)
        gw_config = config.gateway.model_copy(update={"engines": engines})
        if config.policies:
            from harnessrl.stack.policies import gateway_policies

            gw_config = gw_config.model_copy(update={"policies": gateway_policies(config),
                                                     "routing": config.routing})
        if config.engine.kind == "embedded":
            # The gateway renders with the served model's own tokenizer (token-exact mode).
            gw_config.render = gw_config.render.model_copy(update={"tokenizer": config.engine.model})
        if config.engine.kind == "vllm":
            from harnessrl.stack.vllm import gateway_overrides

            gw_config = gw_config.model_copy(update=gateway_overrides(config, engine_server))
        gateway_app = Gateway(store, gw_config, plugins=gateway_plugins(gw_config, config.production))
        mount_dashboard(gateway_app)  # /ui over the run's store, behind the admin token
        gateway = GatewayServer(gateway_app).start()
        if trainer is not None and config.policies:
            from harnessrl.stack.policies import attach, republish

            attach(trainer, gateway)
            if checkpoint is not None:
                republish(trainer, engine)
        elif trainer is not None and config.engine.kind == "vllm":
            from harnessrl.stack.vllm import attach_gateway

            attach_gateway(trainer.publisher, gateway.url, gateway.gateway.admin_token)
            if trainer.policy_version > 0:  # a resumed run: serve the checkpoint's weights again
                trainer.publisher.publish(trainer.model, trainer.policy_version)
        log.info("gateway at %s, engines %s", gateway.url, engines)
        return cls(config, store, gateway, engine, engine_server, trainer, tokenizer)

    def close(self, failed: bool = False) -> None:
        """Stop the gateway and engine; ``failed``: the run ended on an error (tracker runs say so)."""
        if self._closed:
            return
        self._closed = True
        self.gateway.stop()
        if self.engine_server is not None:
            self.engine_server.close()
        if self.trainer is not None:
            self.trainer.close(failed)
