from stats import summarize


def test_summary_of_some_requests():
    assert summarize([120, 80, 100]) == {"count": 3, "mean": 100.0, "median": 100, "max": 120}


def test_even_count_median():
    assert summarize([1, 2, 3, 4])["median"] == 2.5


def test_no_requests():
    assert summarize([]) == {"count": 0, "mean": None, "median": None, "max": None}
