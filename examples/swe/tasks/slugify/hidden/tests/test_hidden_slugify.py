import unittest

from textkit import slugify, word_count


class TestSlugify(unittest.TestCase):
    def test_lowercase(self):
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_repeated_spaces(self):
        self.assertEqual(slugify("  Hello   World  "), "hello-world")

    def test_single_word(self):
        self.assertEqual(slugify("Python"), "python")

    def test_word_count_unchanged(self):
        self.assertEqual(word_count("one two"), 2)
