"""Roman numerals."""

_VALUES = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
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
