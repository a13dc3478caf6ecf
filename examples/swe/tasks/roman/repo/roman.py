"""Roman numerals."""

_VALUES = [
    (1000, "M"),
    (500, "D"),
    (100, "C"),
    (50, "L"),
    (10, "X"),
    (5, "V"),
    (1, "I"),
]


def to_roman(number: int) -> str:
    """Roman numeral for 1 <= number <= 3999, using subtractive notation (4 is IV, 90 is XC)."""
    if not 1 <= number <= 3999:
        raise ValueError(f"{number} is out of range 1..3999")
    out = []
    for value, letters in _VALUES:
        count, number = divmod(number, value)
        out.append(letters * count)
    return "".join(out)
