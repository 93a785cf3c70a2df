def encode(text):
    pass


def decode(text):
    pass
