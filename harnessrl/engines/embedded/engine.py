"""The embedded engine: continuous (iteration-level) batching of a transformers causal LM on CPU or one GPU.

A scheduler thread repeats one iteration: admit waiting requests while the batch has room, prefill at most
``prefill_chunk`` prompt tokens (one request at a time, so no padded queries), then run one decode step for
every running sequence. Requests that arrive during a step join at the next iteration, and a long generation
never blocks newcomers beyond one step. Each choice has its own seeded generator, so its samples do not depend
on what else shares the batch.

Policy versions: a request's version is fixed when it is admitted. Weight changes (``update_weights``, or a
trainer stepping a shared module inside ``paused()``) wait until every admitted request has finished, hold new
requests meanwhile, apply, increment the version, then resume. So no response ever mixes two versions, and a
request in flight during an update finishes on the old weights.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache

from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded.kvcache import BatchKV, cache_rows
from harnessrl.engines.embedded.lora_merge import MergedLora, unsupported
from harnessrl.engines.embedded.outputs import Admitted, Failed, RequestHandle, RequestOutput
from harnessrl.engines.embedded.prefix_cache import PrefixCache
from harnessrl.engines.embedded.request import Request
from harnessrl.engines.embedded.sampling import InvalidRequestError, SamplingParams, sample_rows
from harnessrl.engines.embedded.sequence import Sequence
from harnessrl.engines.embedded.weights import apply_lora, load_full_state_dict, read_lora
from harnessrl.memory import release_free_memory, tune_allocator

logger = logging.getLogger(__name__)

#: The adapter name of the bare base model in a mixed-adapter batch (peft's own name for it).
BASE = "__base__"

_LIVE_ENGINES: weakref.WeakSet[EmbeddedEngine] = weakref.WeakSet()


@atexit.register
def _close_live_engines() -> None:
    """Stop scheduler threads before the interpreter finalizes.

    A daemon thread still inside torch while Python tears down aborts the process ("terminate called
    without an active exception"), which turns a successful script into exit code 134.
    """
    for engine in list(_LIVE_ENGINES):
        engine.close()


class EngineBusyError(RuntimeError):
    """Too many requests are waiting (HTTP 503); retry later or raise ``max_waiting``."""


class _Barrier:
    def __init__(self, keep_running: bool = False) -> None:
        self.granted = threading.Event()
        self.released = threading.Event()
        #: Granted between two decode steps, in-flight generations kept (``[engine] on_update = "continue"``).
        self.keep_running = keep_running


class EmbeddedEngine:
    """In-process engine. ``submit``/``generate`` take prompt token IDs; the HTTP layer does the rendering."""

    def __init__(
        self, model: Any, tokenizer: Any, config: EngineConfig | None = None, *, policy_version: int = 0
    ) -> None:
        # Serving churns the heap (prefix-cache KV, per-request tensors): the fixed mmap threshold and the
        # trimming thread keep resident memory near what is in use in every process that serves, not only
        # under `harnessrl train` (`harnessrl gateway --engine embedded`, `harnessrl collect`, a script).
        tune_allocator()
        self.config = config or EngineConfig()
        #: Where the model, the KV cache and the step inputs live ([engine] device); samplers stay on the CPU.
        self.device = torch.device(self.config.embedded_device())
        if any(p.device != self.device for p in model.parameters()):
            model.to(self.device)
        self.model = model
        self.tokenizer = tokenizer
        self.version = policy_version
        self.model_name = self.config.served_model_name or self.config.model
        max_pos = getattr(getattr(model, "config", None), "max_position_embeddings", None) or 2048
        self.context_window = self.config.context_window or min(int(max_pos), 8192)
        self.eos_ids = _eos_ids(model, tokenizer)
        threads = self.config.num_threads or len(os.sched_getaffinity(0))
        torch.set_num_threads(threads)
        self.stats = {
            "steps": 0,
            "tokens": 0,
            "prefill_tokens": 0,
            "reused_prefix_tokens": 0,
            "requests": 0,
            "max_batch_seen": 0,
            "recomputed_tokens": 0,  # KV computed again for generations kept through a weight update
        }
        #: Seconds the scheduler thread spent in prefill and decode iterations (idle waits and weight swaps
        #: excluded): what a run's cost calls the engine's busy time (``harnessrl/run_cost.py``).
        self.busy_s = 0.0
        self._prefix = PrefixCache(self.config.prefix_cache_tokens)
        #: Several policies: adapter name -> its version (0: not published yet, served by the base).
        self.adapters: dict[str, int] = {}
        self._adapter_prefix: dict[str, PrefixCache] = {}  # KV depends on the adapter: one cache each
        self._retired: set[str] = set()  # dropped adapters peft could not delete (a model's last one)
        self._merged = MergedLora(model)  # the single policy's adapter merged into the weights (lora_merge.py)
        self._lora_config: Any = None
        self._lora_weights: dict[str, torch.Tensor] = {}  # the merged adapter (to hand it to peft on unmerge)
        self._cond = threading.Condition()
        self._waiting: deque[Request] = deque()
        self._prefilling: list[Request] = []
        self._running: list[Sequence] = []
        self._kv = BatchKV(self.config.max_batch, self.device)
        self._barriers: deque[_Barrier] = deque()
        self._seeds = itertools.count()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="harnessrl-engine", daemon=True)
        self._thread.start()
        _LIVE_ENGINES.add(self)

    @classmethod
    def from_config(cls, config: EngineConfig | None = None) -> EmbeddedEngine:
        """Load ``config.model`` (preparing it offline on first use) and start the engine."""
        from harnessrl.models import load_model

        config = config or EngineConfig()
        model, tokenizer = load_model(config.model, dtype=config.embedded_dtype())
        return cls(model, tokenizer, config)

    # ---- requests -------------------------------------------------------------------------------------------

    def submit(
        self,
        prompt_ids: list[int],
        params: SamplingParams | None = None,
        *,
        request_id: str | None = None,
        loop: Any = None,
        adapter: str | None = None,
    ) -> RequestHandle:
        """Queue a request; events go to ``loop`` (asyncio) if given, else to ``handle.result()``.

        ``adapter``: one of ``adapters`` (or ``BASE``): that LoRA adapter serves it, whatever the other
        requests of the batch use."""
        if adapter is not None and adapter != BASE and adapter not in self.adapters:
            raise InvalidRequestError(f"no adapter {adapter!r} is registered; adapters: {sorted(self.adapters)}",
                                      param="model")
        params = params or SamplingParams()
        params.validate()
        prompt_ids = [int(t) for t in prompt_ids]
        max_tokens = self._check_lengths(prompt_ids, params)
        req_id = request_id or uuid.uuid4().hex
        # The handle reaches its request weakly: a strong link back would make each finished request (its
        # prompt ids, its handle's events) a reference cycle, freed only when the cyclic collector runs.
        holder: list[weakref.ref[Request]] = []
        handle = RequestHandle(req_id, params.n, lambda: self._cancel_ref(holder[0]))
        if loop is not None:
            handle.bind_loop(loop)
        req = Request(req_id, prompt_ids, params, max_tokens, self.context_window, handle)
        req.adapter = adapter
        holder.append(weakref.ref(req))
        with self._cond:
            if self._closed:
                raise RuntimeError("engine is closed")
            if len(self._waiting) >= self.config.max_waiting:
                raise EngineBusyError(f"{len(self._waiting)} requests already waiting (max_waiting)")
            self._waiting.append(req)
            self._cond.notify_all()
        return handle

    def generate(
        self, prompt_ids: list[int], params: SamplingParams | None = None, timeout: float | None = None
    ) -> RequestOutput:
        return self.submit(prompt_ids, params).result(timeout)

    def _check_lengths(self, prompt_ids: list[int], params: SamplingParams) -> int:
        window, plen = self.context_window, len(prompt_ids)
        if plen == 0:
            raise InvalidRequestError("the prompt is empty; send at least one token", param="prompt")
        vocab = self.model.get_input_embeddings().num_embeddings
        if min(prompt_ids) < 0 or max(prompt_ids) >= vocab:
            raise InvalidRequestError(f"prompt token IDs must be in [0, {vocab})", param="prompt")
        if plen >= window:
            raise InvalidRequestError(
                f"This model's maximum context length is {window} tokens. However, your prompt has {plen} "
                "tokens, which leaves no room for a completion. Shorten the prompt.",
                code="context_length_exceeded",
                param="messages",
            )
        if params.max_tokens is None:
            default = self.config.default_max_tokens
            return window - plen if default is None else min(default, window - plen)
        if plen + params.max_tokens > window:
            raise InvalidRequestError(
                f"This model's maximum context length is {window} tokens. However, you requested "
                f"{plen + params.max_tokens} tokens ({plen} in the prompt, {params.max_tokens} for the "
                "completion). Reduce the prompt or max_tokens.",
                code="context_length_exceeded",
                param="max_tokens",
            )
        return params.max_tokens

    def _cancel_ref(self, ref: weakref.ref[Request]) -> None:
        req = ref()
        if req is not None:  # else it finished and was dropped: nothing left to stop
            self._cancel(req)

    def _cancel(self, req: Request) -> None:
        with self._cond:
            req.cancelled = True
            self._cond.notify_all()

    # ---- weights and versions -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def paused(self, *, bump_version: bool = True, version: int | None = None,
               keep_running: bool = False) -> Iterator[EmbeddedEngine]:
        """Drain in-flight requests, hold new ones, and give the caller the model until the block ends.

        For a trainer sharing ``engine.model``: run ``optimizer.step()`` inside this block; on a clean exit the
        policy version increments (or becomes ``version``), so publishing costs nothing. Do not call it from
        the asyncio loop that serves this engine (it blocks until in-flight requests finish).

        ``keep_running``: do not drain; the block starts after the current decode step, and the generations in
        flight then continue on the new weights from the tokens already sampled (their KV computed again),
        each token recorded with the version that sampled it.
        """
        new_version = self._next_version(version)
        barrier = _Barrier(keep_running)
        with self._cond:
            if self._closed:
                raise RuntimeError("engine is closed")
            self._barriers.append(barrier)
            self._cond.notify_all()
        barrier.granted.wait()
        try:
            yield self
            if bump_version:
                self.version = new_version
                logger.info("engine now serves policy version %d", self.version)
        finally:
            barrier.released.set()

    def update_weights(
        self,
        state_dict: Mapping[str, torch.Tensor] | None = None,
        *,
        lora: str | Path | Mapping[str, torch.Tensor] | None = None,
        lora_config: Any = None,
        version: int | None = None,
        adapter: str | None = None,
    ) -> int:
        """Load new weights between requests and return the new policy version.

        ``adapter`` (several policies): load ``lora`` as that named adapter and move only its version;
        requests naming other adapters keep theirs (the engine's own ``version`` does not move).

        ``state_dict``: full (or partial) weights with the model's own parameter names, copied in place.
        ``lora``: a peft adapter folder, or an adapter state dict (``get_peft_model_state_dict``) plus
        ``lora_config`` the first time; the model is wrapped with peft once and later adapters replace it.
        """
        if state_dict is None and lora is None:
            raise ValueError("update_weights needs state_dict= or lora=")
        if adapter is not None:
            return self._update_adapter(adapter, lora, lora_config, version)
        merge = False
        if lora is not None:  # read (a folder: disk) and checked before the pause
            weights, config = read_lora(lora, lora_config)
            config = config if config is not None else self._lora_config
            merge = self._serves_merged(weights, config)
        with self.paused(version=version, keep_running=self.config.on_update == "continue"):
            if state_dict is not None:
                load_full_state_dict(self.model, state_dict)
            if lora is not None:
                if merge:
                    self._merged.apply(weights, config)
                else:
                    self._unmerge()
                    self.model = apply_lora(self.model, weights, config)
                # the adapter is kept only while merged: peft holds its own copy otherwise
                self._lora_config, self._lora_weights = config, weights if merge else {}
        return self.version

    def _serves_merged(self, weights: dict[str, torch.Tensor], config: Any) -> bool:
        """Whether this single-policy adapter is served merged into the weights (``[engine] lora_serving``)."""
        if self.config.lora_serving != "merged":
            return False
        if hasattr(self.model, "peft_config") or self.adapters or self._retired:
            why: str | None = "the model serves named adapters (several policies)"
        else:
            why = unsupported(self.model, weights, config)
        if why is not None:
            raise ValueError(f"[engine] lora_serving = \"merged\" cannot serve this adapter: {why}; "
                             "set lora_serving = \"adapter\"")
        return True

    def _unmerge(self) -> None:
        """Back to the base weights, the last single-policy adapter re-applied through peft."""
        if self._merged.active:
            self._merged.restore()
            self.model = apply_lora(self.model, self._lora_weights, self._lora_config)

    def release_memory(self) -> None:
        """Drop the prefix caches and hand freed heap pages back to the kernel, between rollouts and training.

        Their KV was computed with the weights the coming update replaces (publishing clears them anyway), so
        dropping them first costs nothing, and the trainer's activations then start from the engine's idle
        footprint instead of stacking on top of its caches (the demo's peak: 2.97 GB with them kept).
        Waits for in-flight requests like ``paused``.
        """
        with self.paused(bump_version=False):  # the scheduler thread waits on the barrier: caches are ours
            self._clear_prefix_caches()
        release_free_memory()

    def _clear_prefix_caches(self) -> None:
        self._prefix.clear()
        for cache in self._adapter_prefix.values():
            cache.clear()

    def register_adapters(self, names: list[str]) -> None:
        """Serve these adapter names (several policies); each is the base until its first update."""
        for name in names:
            if name == BASE or name.startswith("_"):
                raise ValueError(f"adapter name {name!r} is reserved")
        if names and self._merged.active:  # named adapters need the bare base beside them
            with self.paused(bump_version=False):
                self._unmerge()
        for name in names:
            self.adapters.setdefault(name, 0)

    def _update_adapter(self, name: str, lora: Any, lora_config: Any, version: int | None) -> int:
        if lora is None:
            raise ValueError("an adapter update needs lora=")
        self.register_adapters([name])
        new = self.adapters[name] + 1 if version is None else version
        if new < self.adapters[name]:
            raise ValueError(f"adapter {name!r} version must not go backwards ({new} < {self.adapters[name]})")
        with self.paused(bump_version=False):
            self.model = apply_lora(self.model, lora, lora_config, adapter_name=name)
            self.adapters[name] = new
            self._retired.discard(name)
            self._delete_retired()
        logger.info("engine now serves adapter %s at version %d", name, new)
        return new

    def drop_adapter(self, name: str) -> None:
        """Stop serving a named adapter (a rolled-back canary candidate, a replaced stable version) and free
        its weights; later requests naming it are refused. peft cannot delete a model's last adapter: that
        one stays loaded but unnamed (a few MB) and is deleted once another adapter is added."""
        if name not in self.adapters:
            return
        with self.paused(bump_version=False):
            del self.adapters[name]
            self._adapter_prefix.pop(name, None)
            self._retired.add(name)
            self._delete_retired()
        logger.info("engine no longer serves adapter %s", name)

    def _delete_retired(self) -> None:
        peft = getattr(self.model, "peft_config", {})
        for name in sorted(self._retired):
            if name not in peft:
                self._retired.discard(name)
            elif len(peft) > 1:
                self.model.delete_adapter(name)
                self._retired.discard(name)

    def _row_adapter(self, req: Request) -> str:
        """The adapter name peft runs for a request's rows (``BASE`` while its adapter is unpublished)."""
        if req.adapter is None:  # the single policy's adapter, never one of the named ones
            active = str(getattr(self.model, "active_adapter", BASE))
            return BASE if active in self.adapters or active in self._retired else active
        if req.adapter == BASE or not self.adapters.get(req.adapter):
            return BASE
        return req.adapter

    def _adapter_kwargs(self, reqs: list[Request]) -> dict[str, Any]:
        """peft's mixed-adapter batch (``adapter_names``, one per row) when any request names an adapter."""
        if not hasattr(self.model, "peft_config") or (not self.adapters and not self._retired
                                                         and all(r.adapter is None for r in reqs)):
            return {}
        return {"adapter_names": [self._row_adapter(r) for r in reqs]}

    def _prefix_for(self, req: Request) -> PrefixCache:
        if req.adapter is None:
            return self._prefix
        key = self._row_adapter(req)
        if key not in self._adapter_prefix:
            self._adapter_prefix[key] = PrefixCache(self.config.prefix_cache_tokens)
        return self._adapter_prefix[key]

    def _next_version(self, version: int | None) -> int:
        if version is None:
            return self.version + 1
        if version < self.version:
            raise ValueError(f"policy version must not go backwards ({version} < {self.version})")
        return version

    def close(self) -> None:
        """Stop the scheduler thread (idempotent; also run at interpreter exit)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=10)

    # ---- the scheduler thread -------------------------------------------------------------------------------

    def _loop(self) -> None:
        with torch.inference_mode():
            while True:
                with self._cond:
                    while not (
                        self._closed or self._waiting or self._prefilling or self._running or self._barriers
                    ):
                        self._cond.wait()
                    if self._closed:
                        break
                    self._drop_cancelled()
                    barrier = self._barriers[0] if self._barriers else None
                    if barrier is None:
                        self._admit()
                if barrier is not None and (barrier.keep_running or (not self._prefilling and not self._running)):
                    with self._cond:
                        self._barriers.popleft()
                    barrier.granted.set()
                    barrier.released.wait()
                    self._clear_prefix_caches()  # their KV was computed with the weights that may just have changed
                    if barrier.keep_running and (self._running or self._prefilling):
                        self._recompute_in_flight()
                    continue
                started = time.perf_counter()
                try:
                    self._prefill_step()
                    self._decode_step()
                except Exception as exc:  # keep serving: fail what was in flight, reset the batch
                    logger.exception("generation step failed")
                    self._fail_all(f"generation failed: {exc}")
                self.busy_s += time.perf_counter() - started
        self._fail_all("engine closed", waiting=True)

    def _recompute_in_flight(self) -> None:
        """After an update that kept generations running: their KV, computed with the old weights, is computed
        again with the new ones (prompt and the tokens sampled so far, in prefill chunks), so each continues
        where it was; a request still prefilling starts its prefill again."""
        try:
            for req in self._prefilling:
                req.cache, req.prefilled = None, 0
            running, self._kv = self._running, BatchKV(self.config.max_batch, self.device)
            chunk = self.config.prefill_chunk
            for seq in running:
                ids, cache = seq.req.prompt_ids + seq.token_ids[:-1], DynamicCache()
                for start in range(0, len(ids), chunk):
                    piece = torch.tensor([ids[start : start + chunk]], dtype=torch.long, device=self.device)
                    self.model(input_ids=piece, cache=cache, use_cache=True, logits_to_keep=1,
                               **self._adapter_kwargs([seq.req]))
                self._kv.join(cache_rows(cache), 1)
                self.stats["recomputed_tokens"] += len(ids)
        except Exception as exc:  # keep serving: fail what was in flight, as a failed step does
            logger.exception("recomputing the in-flight KV after a weight update failed")
            self._fail_all(f"generation failed after a weight update: {exc}")

    def _admit(self) -> None:
        used = len(self._running) + sum(r.params.n for r in self._prefilling)
        while self._waiting:
            req = self._waiting[0]
            if used and used + req.params.n > self.config.max_batch:
                break
            self._waiting.popleft()
            used += req.params.n
            self._prefilling.append(req)
            self.stats["requests"] += 1
            version = self.version if req.adapter is None else self.adapters.get(req.adapter, 0)
            req.handle._emit(Admitted(version, req.prompt_ids))

    def _drop_cancelled(self) -> None:
        for req in [r for r in self._waiting if r.cancelled]:
            self._waiting.remove(req)
            req.handle._finish()
        for req in [r for r in self._prefilling if r.cancelled]:
            self._prefilling.remove(req)
            req.handle._finish()
        if any(s.req.cancelled for s in self._running):
            keep = [i for i, s in enumerate(self._running) if not s.req.cancelled]
            for req in {id(s.req): s.req for s in self._running if s.req.cancelled}.values():
                req.handle._finish()
            self._running = [self._running[i] for i in keep]
            self._kv.keep(keep)

    def _prefill_step(self) -> None:
        budget = self.config.prefill_chunk
        for req in list(self._prefilling):
            if budget <= 0:
                break
            if req.cache is None:
                reused, cached = self._prefix_for(req).lookup(req.prompt_ids)
                req.cache, req.prefilled = cached or DynamicCache(), reused
                self.stats["reused_prefix_tokens"] += reused
            end = min(len(req.prompt_ids), req.prefilled + budget)
            ids = torch.tensor([req.prompt_ids[req.prefilled : end]], dtype=torch.long, device=self.device)
            out = self.model(input_ids=ids, cache=req.cache, use_cache=True, logits_to_keep=1,
                             **self._adapter_kwargs([req]))
            budget -= end - req.prefilled
            self.stats["prefill_tokens"] += end - req.prefilled
            req.prefilled = end
            if end == len(req.prompt_ids):
                self._prefilling.remove(req)
                self._start_choices(req, out.logits[0, -1])

    def _start_choices(self, req: Request, logits: torch.Tensor) -> None:
        seqs = []
        for index in range(req.params.n):
            seed = (
                req.params.seed + index
                if req.params.seed is not None
                else self.config.seed * 1_000_003 + next(self._seeds)
            )
            seqs.append(Sequence(req, index, torch.Generator().manual_seed(seed)))
        self._sample_into(seqs, logits.expand(len(seqs), -1))
        alive = [seq for seq in seqs if not seq.finished]
        assert req.cache is not None
        self._prefix_for(req).insert(req.prompt_ids, cache_rows(req.cache))
        if alive:
            self._kv.join(cache_rows(req.cache), len(alive))
            self._running.extend(alive)
        req.cache = None
        req.alive = len(alive)
        if not alive:
            req.handle._finish()

    def _sample_into(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        """Sample each sequence's next token from its row of ``logits`` and stream it."""
        picks = sample_rows(logits, [s.req.params for s in seqs], [s.generator for s in seqs])
        for seq, (token, logprob, top) in zip(seqs, picks, strict=True):
            version = self.version if seq.req.adapter is None else self.adapters.get(seq.req.adapter, 0)
            delta = seq.append(token, logprob, top, self.tokenizer, self.eos_ids, version)
            self.stats["tokens"] += 1
            seq.req.handle._emit(delta)

    def _decode_step(self) -> None:
        if not self._running:
            return
        running = self._running
        ids = torch.tensor([[s.token_ids[-1]] for s in running], dtype=torch.long, device=self.device)
        pos = torch.tensor([[s.next_position] for s in running], dtype=torch.long, device=self.device)
        mask = self._kv.step_mask()
        padded = not bool(self._kv.valid.all())  # without padding, SDPA runs mask-free (faster kernel)
        out = self.model(
            input_ids=ids,
            attention_mask=mask if padded else None,
            position_ids=pos,
            cache=self._kv.cache(),
            use_cache=True,
            logits_to_keep=1,
            **self._adapter_kwargs([s.req for s in running]),
        )
        self._kv.after_step(mask)
        self.stats["steps"] += 1
        self.stats["max_batch_seen"] = max(self.stats["max_batch_seen"], len(running))
        logits = out.logits[:, -1]
        keep: list[int] = []
        self._sample_into(running, logits)
        for row, seq in enumerate(running):
            if seq.finished and not seq.req.cancelled:
                # the cache holds the prompt and every completion token but the last (never fed back)
                self._prefix_for(seq.req).insert(seq.req.prompt_ids + seq.token_ids[:-1], self._kv.row(row))
            if seq.finished:
                seq.req.alive -= 1
                if seq.req.alive == 0:
                    seq.req.handle._finish()
            else:
                keep.append(row)
        if len(keep) != len(running):
            self._running = [running[i] for i in keep]
            self._kv.keep(keep)

    def _fail_all(self, message: str, waiting: bool = False) -> None:
        with self._cond:
            reqs = {id(s.req): s.req for s in self._running}
            reqs.update({id(r): r for r in self._prefilling})
            if waiting:
                reqs.update({id(r): r for r in self._waiting})
                self._waiting.clear()
            self._running, self._prefilling, self._kv = [], [], BatchKV(self.config.max_batch, self.device)
        for req in reqs.values():
            req.handle._emit(Failed(message))
            req.handle._finish()


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    ids: set[int] = set()
    gen = getattr(model, "generation_config", None)
    for value in (getattr(gen, "eos_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
    return frozenset(ids)
