"""Small descriptive statistics."""


def mean(values):
    """The arithmetic mean of a non-empty sequence."""
    if not values:
        raise ValueError("mean of an empty sequence")
    return sum(values) / len(values)


def median(values):
    """The middle value of a non-empty sequence (the mean of the two middle values when even)."""
    if not values:
        raise ValueError("median of an empty sequence")
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
