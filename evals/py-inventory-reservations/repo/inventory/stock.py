"""Stock per SKU: what is on hand, and how much of it is reserved by open orders."""


class OutOfStock(Exception):
    def __init__(self, sku, wanted, available):
        super().__init__(f"{sku}: wanted {wanted}, only {available} available")
        self.sku, self.wanted, self.available_qty = sku, wanted, available


class Stock:
    def __init__(self, levels):
        self._on_hand = dict(levels)
        self._reserved = {sku: 0 for sku in levels}

    def on_hand(self, sku):
        return self._on_hand.get(sku, 0)

    def reserved(self, sku):
        return self._reserved.get(sku, 0)

    def available(self, sku):
        return self.on_hand(sku) - self.reserved(sku)

    def reserve(self, sku, qty):
        if qty <= 0:
            raise ValueError("quantity must be positive")
        if self.available(sku) < qty:
            raise OutOfStock(sku, qty, self.available(sku))
        self._reserved[sku] = self.reserved(sku) + qty

    def release(self, sku, qty):
        if qty > self.reserved(sku):
            raise ValueError(f"{sku}: cannot release {qty}, only {self.reserved(sku)} reserved")
        self._reserved[sku] -= qty

    def commit(self, sku, qty):
        """Reserved items leave the warehouse."""
        self.release(sku, qty)
        self._on_hand[sku] -= qty

    def receive(self, sku, qty):
        self._on_hand[sku] = self.on_hand(sku) + qty
        self._reserved.setdefault(sku, 0)
