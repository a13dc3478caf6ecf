"""GPT-2's byte-level BPE alphabet: the printable character each byte is written as in such vocabularies.

A byte-level token string (``convert_ids_to_tokens``) maps back to its exact bytes, even mid-character,
through ``BYTE_OF``; the engine's logprob ``bytes`` and the gateway's token-ID redaction both need that.
"""

from __future__ import annotations


def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


#: The byte each character of a byte-level token string stands for.
BYTE_OF: dict[str, int] = {c: b for b, c in _bytes_to_unicode().items()}
