"""The store's write cache (``SeqCache``): it counts what it holds -- tokens and what it keeps of each
request -- against its bound, and a rollout keeps a bounded number of leaves."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

from harnessrl.store.codec import compact_request, expand_request, request_shape
from harnessrl.store.rows import MAX_LEAVES, RolloutSeqs, SeqCache, encode_call

from ._helpers import make_call


def _conversation(rid: str, turns: int, words: int = 40) -> RolloutSeqs:
    """A multi-turn chat of ``turns`` calls, each request resending the whole history."""
    seqs = RolloutSeqs()
    messages: list[dict] = []
    prompt: list[int] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"turn {turn} " + "word " * words})
        prompt = prompt + list(range(turn * 10, turn * 10 + 10))
        encode_call(make_call(rid, prompt, [7, 8, 9], request={"model": "m", "messages": list(messages)}), seqs,
                    0.0)
        messages.append({"role": "assistant", "content": "ok " * words})
        prompt = prompt + [7, 8, 9]
    return seqs


def test_cache_counts_requests_and_evicts_past_its_bound():
    one = _conversation("r0", 30)
    tokens = sum(len(leaf.full) for leaf in one.leaves)
    assert one.nbytes() > tokens  # what it keeps of the request is counted, not only the token bytes
    cache = SeqCache(max_bytes=3 * one.nbytes())
    for i in range(10):
        cache.put(f"r{i}", _conversation(f"r{i}", 30))
        assert cache.nbytes <= cache.max_bytes
    assert len(cache) == 3 and cache.get("r9") is not None and cache.get("r0") is None


def measure_held() -> tuple[int, int]:
    """(bytes tracemalloc sees a 60-turn rollout's cached state hold, what its ``nbytes`` says)."""
    _conversation("warm-up", 60, words=200)  # fills struct's bounded cache of pack formats
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        seqs = _conversation("r", 60, words=200)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return held, seqs.nbytes()


def test_what_the_cache_counts_is_what_it_holds():
    """tracemalloc's measure of a rollout's cached state stays within 1.5x of what ``nbytes`` says (the
    requests it saw were 20x bigger: only their digests are kept).

    Measured in a fresh interpreter: inside the whole suite, state earlier tests left behind (full caches
    whose evicted entries were allocated before tracing began) made the same measure 3x larger."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from unit.store.test_write_cache import measure_held; print(json.dumps(measure_held()))")
    tests_dir = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code, str(tests_dir)], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    held, nbytes = json.loads(out.strip().splitlines()[-1])
    request_bytes = 120 * len("word " * 200)  # the last request's 120 messages
    assert 0.5 * nbytes <= held <= 1.5 * nbytes, (held, nbytes)
    assert nbytes < request_bytes / 20


def test_a_rollout_keeps_at_most_max_leaves():
    seqs = RolloutSeqs()
    for branch in range(3 * MAX_LEAVES):  # conversations that never extend each other
        encode_call(make_call("r", [1000 + branch, 1, 2], [3]), seqs, 0.0)
    assert len(seqs.leaves) == MAX_LEAVES
    assert [leaf.index for leaf in seqs.leaves] == list(range(2 * MAX_LEAVES, 3 * MAX_LEAVES))


def test_compaction_against_the_parents_shape_inverts():
    parent = {"model": "m", "messages": [{"a": 1}, {"b": [1, 2]}], "prompt": "p" * 300}
    child = {"model": "m", "messages": [{"a": 1}, {"b": [1, 2]}, {"c": 3}], "prompt": "p" * 300 + "more"}
    stored, keep = compact_request(child, request_shape(parent))
    assert keep == {"messages": 2, "prompt": 300} and stored["messages"] == [{"c": 3}]
    assert expand_request(stored, keep, parent) == child
    # JSON equality, not Python's: 1.0 is not 1
    stored, keep = compact_request({"messages": [{"a": 1.0}]}, request_shape(parent))
    assert keep == {}
