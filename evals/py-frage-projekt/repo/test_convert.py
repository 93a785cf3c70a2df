from convert import celsius_to_fahrenheit, fahrenheit_to_celsius


def test_roundtrip():
    assert fahrenheit_to_celsius(celsius_to_fahrenheit(37)) == 37
