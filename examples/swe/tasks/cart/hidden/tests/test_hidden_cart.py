import unittest

from cart import Cart


class TestAddTwice(unittest.TestCase):
    def test_quantities_accumulate(self):
        c = Cart()
        c.add("apple", 0.5, 2)
        c.add("apple", 0.5, 3)
        self.assertEqual(c.lines["apple"], (0.5, 5))
        self.assertEqual(c.total(), 2.5)

    def test_other_lines_untouched(self):
        c = Cart()
        c.add("pear", 1.0)
        c.add("apple", 2.0)
        c.add("apple", 2.0)
        self.assertEqual(c.total(), 5.0)

    def test_bad_quantity(self):
        with self.assertRaises(ValueError):
            Cart().add("x", 1.0, 0)
