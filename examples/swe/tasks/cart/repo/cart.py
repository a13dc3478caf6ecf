"""A shopping cart with a percentage discount."""


class Cart:
    def __init__(self):
        self.lines = {}

    def add(self, name: str, price: float, quantity: int = 1) -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        old_price, old_qty = self.lines.get(name, (price, 0))
        self.lines[name] = (price, quantity)

    def total(self, discount_percent: float = 0.0) -> float:
        subtotal = sum(price * qty for price, qty in self.lines.values())
        return round(subtotal * (1 - discount_percent / 100), 2)
