"""Stock levels, reservations and the order workflow of the shop."""
