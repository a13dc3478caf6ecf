import unittest

from cart import Cart


class TestCart(unittest.TestCase):
    def test_total(self):
        c = Cart()
        c.add("apple", 0.5, 4)
        c.add("pear", 1.25)
        self.assertEqual(c.total(), 3.25)

    def test_discount(self):
        c = Cart()
        c.add("book", 20.0)
        self.assertEqual(c.total(10), 18.0)


if __name__ == "__main__":
    unittest.main()
