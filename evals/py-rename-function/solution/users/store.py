"""Users kept in memory, looked up by id or by e-mail."""

_USERS = {
    1: {"id": 1, "name": "Ada", "email": "ada@example.com", "active": True},
    2: {"id": 2, "name": "Grace", "email": "grace@example.com", "active": False},
    3: {"id": 3, "name": "Linus", "email": "linus@example.com", "active": True},
}


def find_user(user_id):
    """The user with this id, or None."""
    return _USERS.get(user_id)


def by_email(email):
    for user in _USERS.values():
        if user["email"] == email.lower():
            return user
    return None


def all_ids():
    return sorted(_USERS)
