"""Small text helpers."""


def slugify(title: str) -> str:
    """Turn a title into a URL slug: lowercase words joined by single dashes."""
    words = title.split(" ")
    return "-".join(words)


def word_count(text: str) -> int:
    return len(text.split())
