"""A small double-entry ledger: accounts hold integer cents; every transfer moves money from one
account to another and is kept in the history."""

WORLD = "@world"


class LedgerError(Exception):
    """A transfer or an account request that the ledger refuses."""


def _amount(cents, sign):
    text = f"{abs(cents) // 100}.{abs(cents) % 100:02d}"
    if cents < 0:
        return "-" + text
    return ("+" if sign else "") + text


class Ledger:
    def __init__(self):
        self._balances = {WORLD: 0}
        self._limits = {WORLD: None}
        self._transfers = []

    def open(self, name, overdraft=0):
        """Open an account with a balance of 0. ``overdraft`` (cents, >= 0) is how far below zero
        the balance may go. Opening a name that is already open raises LedgerError."""
        if name in self._balances:
            raise LedgerError(f"{name} is already open")
        if overdraft < 0:
            raise LedgerError("the overdraft must be 0 or more")
        self._balances[name] = 0
        self._limits[name] = overdraft

    def balance(self, name):
        """The account's balance in cents; an unknown account raises LedgerError."""
        if name not in self._balances:
            raise LedgerError(f"no account {name}")
        return self._balances[name]

    def deposit(self, name, cents, memo=""):
        """Money in from outside: the same as a transfer from the "@world" account, which has no limit."""
        return self.transfer(WORLD, name, cents, memo)

    def transfer(self, source, target, cents, memo=""):
        """Move ``cents`` (a positive int) from ``source`` to ``target``. Refused with LedgerError,
        and nothing changes, when an account is unknown, the amount is not positive, source and
        target are the same, or the source would go below minus its overdraft. Returns the
        transfer's number: 1 for the first one, then 2, 3, ..."""
        for name in (source, target):
            self.balance(name)
        if not isinstance(cents, int) or cents <= 0:
            raise LedgerError("the amount must be a positive number of cents")
        if source == target:
            raise LedgerError("source and target are the same account")
        limit = self._limits[source]
        if limit is not None and self._balances[source] - cents < -limit:
            raise LedgerError(f"{source} would go below its overdraft")
        self._balances[source] -= cents
        self._balances[target] += cents
        number = len(self._transfers) + 1   # refused transfers take no number
        self._transfers.append((number, source, target, cents, memo))
        return number

    def history(self, name):
        """The account's transfers, oldest first, each as (number, other account, signed cents, memo):
        money in is positive, money out negative."""
        self.balance(name)
        out = []
        for number, source, target, cents, memo in self._transfers:
            if source == name:
                out.append((number, target, -cents, memo))
            elif target == name:
                out.append((number, source, cents, memo))
        return out

    def statement(self, name):
        """The history as text, one line per transfer, "#<number> <other> <+/-amount> <memo>" with the
        amount as +12.34 / -0.50 and the memo left out when empty, then "balance <amount>" on the
        last line with the amount as 12.34 / -0.50 (no plus sign)."""
        lines = []
        for number, other, cents, memo in self.history(name):
            lines.append(f"#{number} {other} {_amount(cents, True)}" + (f" {memo}" if memo else ""))
        lines.append(f"balance {_amount(self.balance(name), False)}")
        return "\n".join(lines)
