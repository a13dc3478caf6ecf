"""A small application the chores are done in."""


def greet(name: str) -> str:
    return f"Hello, {name}!"
