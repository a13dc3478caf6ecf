import sys
import unittest

sys.path.insert(0, "/app")

from stats import mean  # noqa: E402


class MeanTest(unittest.TestCase):
    def test_two_values(self) -> None:
        self.assertEqual(mean([2, 4]), 3.0)

    def test_one_value(self) -> None:
        self.assertEqual(mean([5]), 5.0)

    def test_floats(self) -> None:
        self.assertAlmostEqual(mean([0.5, 1.5, 4.0]), 2.0)


if __name__ == "__main__":
    unittest.main()
