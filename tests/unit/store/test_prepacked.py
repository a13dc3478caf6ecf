"""A prompt the gateway packed already is stored from those bytes, and only while they are still its tokens.

The gateway packs each prompt once (gateway/fidelity.py ``pack``) for the prefix verdict, the rollout's
history and the store; ``NewCall.packed_prompt`` carries the bytes with the list they were packed from. Token
redaction replaces a call's list (redaction/tokens.py), and the store must then pack what the call holds.
"""

from __future__ import annotations

from array import array
from pathlib import Path

from harnessrl.gateway.fidelity import joined, pack
from harnessrl.store.codec import encode_ids, prepacked
from harnessrl.store.sqlite import SqliteStore

from ._helpers import make_call


def test_the_stored_prompt_comes_from_the_packed_bytes_of_the_same_list(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
        first = make_call(rid, [5, 6, 7], [8])
        first.packed_prompt = prepacked(first.prompt_token_ids, pack(first.prompt_token_ids))
        assert first.prompt_bytes() == encode_ids([5, 6, 7])
        replaced = make_call(rid, [5, 6, 7, 8, 9], [10])
        replaced.packed_prompt = prepacked(replaced.prompt_token_ids, pack(replaced.prompt_token_ids))
        replaced.prompt_token_ids = [5, 6, 7, 8, 0]  # what a token redaction does: a new list
        assert replaced.prompt_bytes() is None
        store.record_calls([first, replaced])
        assert [c.prompt_token_ids for c in store.get_calls(rid)] == [[5, 6, 7], [5, 6, 7, 8, 0]]


def test_only_int32_arrays_are_the_stored_form() -> None:
    ids = [1, 2, 3]
    assert prepacked(ids, pack(ids)) == (ids, encode_ids(ids))
    assert prepacked(ids, None) is None
    big = [1, 2**40]
    assert pack(big).typecode == "q" and prepacked(big, pack(big)) is None


def test_pack_keeps_an_array_and_joined_widens_to_the_wider() -> None:
    a = pack([1, 2])
    assert pack(a) is a
    both = joined(a, pack([2**40]))
    assert both.typecode == "q" and both.tolist() == [1, 2, 2**40]
    assert joined(a, pack([3])) == array("i", [1, 2, 3])
