"""What the HTTP handlers call."""

from users.store import by_email, get_user


def profile(user_id):
    user = get_user(user_id)
    if user is None:
        return {"error": "no such user"}
    return {"name": user["name"], "active": user["active"]}


def login(email):
    user = by_email(email)
    return user is not None and get_user(user["id"])["active"]
