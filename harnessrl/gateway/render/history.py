"""A rollout's earlier calls, kept so later prompts can reuse their exact tokens.

Each remembered call is a :class:`ChainEntry`. Its prompt is stored as a link to the entry it extended
(how many of that entry's context tokens it reused) plus its own new tokens, so a rollout's memory grows
with the tokens it produced, not with the square of its length. Entries are indexed by the digest of their
conversation (request messages + the returned assistant message), so finding the longest earlier call whose
conversation is a prefix of a new request is one dictionary lookup per message.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field


@dataclass(slots=True, eq=False)
class ChainEntry:
    """One remembered call: ``prompt = parent.context[:parent_len] + own``,
    ``context = prompt + completion + end_of_turn`` (``end_of_turn``: the template's end-of-turn tokens the
    engine did not sample, appended as context so the next turn's glue follows a closed assistant turn)."""

    label: int
    conversation_digest: bytes
    n_messages: int
    tools_key: bytes
    parent: ChainEntry | None
    parent_len: int
    own: array
    completion: array
    end_of_turn: array
    #: Length and digest of the template text this call's prompt was rendered from (-1: unknown, e.g. after
    #: ``load``); lets the next call check "the assistant turn starts where my prompt ended" without
    #: rendering the prompt again.
    prompt_text_len: int = -1
    prompt_text_digest: bytes = b""

    def _chain(self) -> list[ChainEntry]:
        chain: list[ChainEntry] = []
        node: ChainEntry | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        chain.reverse()
        return chain

    def prompt_ids(self) -> list[int]:
        seq: list[int] = []
        chain = self._chain()
        for i, node in enumerate(chain):
            if i:
                parent = chain[i - 1]
                seq.extend(parent.completion)
                seq.extend(parent.end_of_turn)
                del seq[node.parent_len :]
            seq.extend(node.own)
        return seq

    def context_ids(self) -> list[int]:
        seq = self.prompt_ids()
        seq.extend(self.completion)
        seq.extend(self.end_of_turn)
        return seq


def token_array(ids: Sequence[int]) -> array:
    return array("l", ids)


@dataclass(slots=True)
class RolloutHistory:
    entries: list[ChainEntry] = field(default_factory=list)
    by_digest: dict[bytes, list[ChainEntry]] = field(default_factory=dict)
    next_label: int = 0
    tool_calls_issued: int = 0
    tokens: int = 0  # token IDs the entries hold (what [gateway.render] max_history_tokens bounds)

    def add(self, entry: ChainEntry) -> None:
        self.entries.append(entry)
        self.tokens += len(entry.own) + len(entry.completion) + len(entry.end_of_turn)
        self.by_digest.setdefault(entry.conversation_digest, []).append(entry)
        self.next_label = max(self.next_label, entry.label + 1)

    def candidates(self, prefix_digests: Sequence[bytes]) -> Iterator[tuple[int, list[ChainEntry]]]:
        """``(k, entries)`` whose conversation equals the first ``k`` messages, longest first."""
        for k in range(len(prefix_digests) - 1, 0, -1):
            found = self.by_digest.get(prefix_digests[k])
            if found:
                yield k, list(found)
