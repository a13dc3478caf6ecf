import unittest

from stack import EmptyStackError, Stack


class TestStack(unittest.TestCase):
    def test_pop_order(self):
        s = Stack()
        s.push(1)
        s.push(2)
        self.assertEqual(s.pop(), 2)

    def test_empty_pop(self):
        with self.assertRaises(EmptyStackError):
            Stack().pop()


if __name__ == "__main__":
    unittest.main()
