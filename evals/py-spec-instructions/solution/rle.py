import re


def encode(text):
    if any(ch.isdigit() for ch in text):
        raise ValueError("digits cannot be run-length encoded")
    out = []
    for m in re.finditer(r"(.)\1*", text, re.DOTALL):
        run = m.group(0)
        out.append((str(len(run)) if len(run) > 1 else "") + run[0])
    return "".join(out)


def decode(text):
    return "".join(ch * int(count or 1) for count, ch in re.findall(r"(\d*)(\D)", text))
