import unittest

from stack import EmptyStackError, Stack


class TestPeek(unittest.TestCase):
    def test_peek_is_top(self):
        s = Stack()
        for x in (1, 2, 3):
            s.push(x)
        self.assertEqual(s.peek(), 3)
        self.assertEqual(len(s), 3)

    def test_peek_matches_pop(self):
        s = Stack()
        s.push("a")
        s.push("b")
        self.assertEqual(s.peek(), s.pop())

    def test_peek_empty(self):
        with self.assertRaises(EmptyStackError):
            Stack().peek()
