import pytest

from ledger import Ledger, LedgerError


def make():
    book = Ledger()
    book.open("alice")
    book.open("bob", overdraft=500)
    return book


def test_deposit_and_transfer():
    book = make()
    assert book.deposit("alice", 10_000, "salary") == 1
    assert book.transfer("alice", "bob", 2_550, "rent") == 2
    assert book.balance("alice") == 7_450 and book.balance("bob") == 2_550


def test_overdraft_limit():
    book = make()
    book.transfer("bob", "alice", 500)
    with pytest.raises(LedgerError):
        book.transfer("bob", "alice", 1)
    assert book.balance("bob") == -500 and book.balance("alice") == 500


def test_refusals_change_nothing():
    book = make()
    for args in (("alice", "bob", 1), ("alice", "carol", 1), ("bob", "bob", 1), ("bob", "alice", 0)):
        with pytest.raises(LedgerError):
            book.transfer(*args)
    assert book.history("alice") == [] and book.balance("bob") == 0
    with pytest.raises(LedgerError):
        book.open("alice")


def test_history_and_statement():
    book = make()
    book.deposit("alice", 1_000, "gift")
    with pytest.raises(LedgerError):
        book.transfer("alice", "bob", 1_250)
    assert book.history("bob") == []
    book.transfer("alice", "bob", 950, "lunch")
    assert book.history("alice") == [(1, "@world", 1_000, "gift"), (2, "bob", -950, "lunch")]
    assert book.statement("bob") == "#2 alice +9.50 lunch\nbalance 9.50"
