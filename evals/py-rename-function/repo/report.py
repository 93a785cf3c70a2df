"""The nightly report of active users."""

import users.store as store


def active_names():
    return [store.get_user(i)["name"] for i in store.all_ids() if store.get_user(i)["active"]]


def line():
    return "active: " + ", ".join(active_names())
