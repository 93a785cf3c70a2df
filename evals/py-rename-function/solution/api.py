"""What the HTTP handlers call."""

from users.store import by_email, find_user


def profile(user_id):
    user = find_user(user_id)
    if user is None:
        return {"error": "no such user"}
    return {"name": user["name"], "active": user["active"]}


def login(email):
    user = by_email(email)
    return user is not None and find_user(user["id"])["active"]
