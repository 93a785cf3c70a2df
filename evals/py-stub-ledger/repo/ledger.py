"""A small double-entry ledger: accounts hold integer cents; every transfer moves money from one
account to another and is kept in the history."""


class LedgerError(Exception):
    """A transfer or an account request that the ledger refuses."""


class Ledger:
    def __init__(self):
        raise NotImplementedError

    def open(self, name, overdraft=0):
        """Open an account with a balance of 0. ``overdraft`` (cents, >= 0) is how far below zero
        the balance may go. Opening a name that is already open raises LedgerError."""
        raise NotImplementedError

    def balance(self, name):
        """The account's balance in cents; an unknown account raises LedgerError."""
        raise NotImplementedError

    def deposit(self, name, cents, memo=""):
        """Money in from outside: the same as a transfer from the "@world" account, which has no limit."""
        raise NotImplementedError

    def transfer(self, source, target, cents, memo=""):
        """Move ``cents`` (a positive int) from ``source`` to ``target``. Refused with LedgerError,
        and nothing changes, when an account is unknown, the amount is not positive, source and
        target are the same, or the source would go below minus its overdraft. Returns the
        transfer's number: 1 for the first one, then 2, 3, ..."""
        raise NotImplementedError

    def history(self, name):
        """The account's transfers, oldest first, each as (number, other account, signed cents, memo):
        money in is positive, money out negative."""
        raise NotImplementedError

    def statement(self, name):
        """The history as text, one line per transfer, "#<number> <other> <+/-amount> <memo>" with the
        amount as +12.34 / -0.50 and the memo left out when empty, then "balance <amount>" on the
        last line with the amount as 12.34 / -0.50 (no plus sign)."""
        raise NotImplementedError
