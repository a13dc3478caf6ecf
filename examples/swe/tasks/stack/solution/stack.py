"""A last-in, first-out stack."""


class EmptyStackError(Exception):
    pass


class Stack:
    def __init__(self):
        self._items = []

    def push(self, item):
        self._items.append(item)

    def pop(self):
        if not self._items:
            raise EmptyStackError("pop from an empty stack")
        return self._items.pop()

    def peek(self):
        """The item `pop` would return, without removing it."""
        if not self._items:
            raise EmptyStackError("peek at an empty stack")
        return self._items[-1]

    def __len__(self):
        return len(self._items)
