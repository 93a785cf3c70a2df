from report import summary

HEADER = "date,region,amount_cents\n"
ROWS = "2024-03-01,north,12000\n2024-03-02,south,5050\n2024-03-09,north,7500\n2024-03-30,east,23000"


def test_summary_of_the_march_export():
    # Saved from the shop's admin page: no newline after the last row.
    assert summary(HEADER + ROWS) == "east: 230.00\nnorth: 195.00\nsouth: 50.50\nTotal: 475.50"


def test_summary_when_the_export_ends_with_a_newline():
    assert summary(HEADER + ROWS + "\n").endswith("Total: 475.50")


def test_summary_of_an_empty_month():
    assert summary(HEADER) == "Total: 0.00"
