import unittest

from temps import celsius_to_fahrenheit


class TestCelsiusToFahrenheit(unittest.TestCase):
    def test_freezing_point(self):
        self.assertEqual(celsius_to_fahrenheit(0), 32)

    def test_boiling_point(self):
        self.assertEqual(celsius_to_fahrenheit(100), 212)


if __name__ == "__main__":
    unittest.main()
