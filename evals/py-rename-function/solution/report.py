"""The nightly report of active users."""

import users.store as store


def active_names():
    return [store.find_user(i)["name"] for i in store.all_ids() if store.find_user(i)["active"]]


def line():
    return "active: " + ", ".join(active_names())
