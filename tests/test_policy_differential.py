"""Differential test: the commands keel's policy reads in a line are the commands bash runs.

Commands are generated from pieces — quoting, line continuations, here-documents (quoted and
unquoted delimiters, ``<<-``, a delimiter split by a continuation, the here-document before its
redirect), command and process substitutions, redirects before, between and after the words,
LF, CR-LF and lone CR line ends — around a harmless marker, ``kmark ID``: a script on PATH that
appends its arguments to a log. Each command is run by real bash (``bash -c``, as run_shell
runs it) in a scratch directory; the log says which markers bash ran and with which argument.
keel's reading of the same text (every part the policy judges, substitutions, ``bash -c`` and
here-documents fed to a shell included) must name each of them with the same argument — or
keel must have declined to read the line (a structural "ask": it could not be parsed or read
with certainty), which is safe but counted: too many declines would make the test mean nothing.
"""

from __future__ import annotations

import os
import random
import stat
import subprocess
from pathlib import Path

import pytest

from keel.policy.shell.risk import analyze_command

SAMPLES = 1200
MIN_RAN = 600            # generated lines in which bash ran at least one marker
MAX_DECLINED = 0.25      # of those, the share keel may decline to read

MARK = "kmark"


def _marker(box: Path) -> dict[str, str]:
    bin_dir = box / "bin"
    bin_dir.mkdir()
    script = bin_dir / MARK
    script.write_text('#!/bin/sh\nprintf "%s\\n" "$*" >> "$KMARK_LOG"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(box), "KMARK_LOG": str(box / "kmark.log"),
            "LC_ALL": "C"}


# -- the generator -------------------------------------------------------------------------------

NOISE = ["echo 'a b'", 'echo "a\\"b"', "echo $'x\\'y'", "echo a\\ b", "true", ": x", "echo '#'",
         "echo x#y", "echo ')'", "echo '$(no)'", 'echo "\\$(no)"', "echo \\$(no)", "echo a # c",
         "echo a # c \\", "printf '%s\\n' x"]
REDIRECTS = ["> o1", "2>/dev/null", ">>o2", "</dev/null", "<<<x", "2>&1", "&>o3"]


def _payload(rng: random.Random, ident: str) -> str:
    """One marker, perhaps carried by a substitution, a group, a nested shell or a here-document."""
    p = f"{MARK} {ident}"
    forms = [
        p, f"$({p})", f"`{p}`", f'echo "$({p})"', f"echo $({p})", f"cat <({p})", f"{{ {p}; }}", f"({p})",
        f"if true; then {p}; fi", f"bash -c '{p}'", f"eval '{p}'", f"x=$({p})", f": ${{y:=$({p})}}",
        f'echo "$\\\n({p})"', f"echo $\\\n({p})", f'echo "`{p}`"', f"{p} &\nwait",
        f"cat <<EOF\n$({p})\nEOF", f"cat <<'EOF'\n$({p})\nEOF", f"cat <<EOF\n$\\\n({p})\nEOF",
        f"cat <<EOF\nline\nEO\\\nF\n{p}\nEOF", f"cat <<'EOF'\nline\nEO\\\nF\n{p}\nEOF",
        f"cat <<-EOF\n\tx\n\tEOF\n{p}", f"cat <<EOF > o4\nbody\nEOF\n{p}", f"cat > o5 <<EOF\n$({p})\nEOF",
        f"cat <<EOF | cat\n$({p})\nEOF", f"bash <<EOF\n{p}\nEOF", f"bash <<'EOF'\n{p}\nEOF",
        f"echo \"$({p})\" > o6", f"{MARK} {ident}\\\n-tail", f"{MARK} \\\n{ident}",
        f"echo SAFE \\\r\n{p}", f"echo SAFE\r\n{p}", f"echo a\r{p}", f"{p}\r", f"echo \"a\\\r\n\"; {p}",
        f"cat <<EOF\nx\nEOF\r\n{p}\nEOF", f"# note \\\n{p}", f"echo 'a\\\n{p}'", f"echo \"a\\\n$({p})\"",
        f"cat <<E\\\nOF\nx\nEOF\n{p}", f"echo ${{v:-$({p})}}", f"echo \"${{v:-$({p})}}\"",
    ]
    form = rng.choice(forms)
    if rng.random() < 0.3 and "\n" not in form:
        words = form.split(" ")
        at = rng.randint(0, len(words))
        words.insert(at, rng.choice(REDIRECTS))     # a redirect before, between or after the words
        form = " ".join(words)
    return form


def generate(rng: random.Random, n: int) -> list[str]:
    commands = []
    for k in range(n):
        pieces = rng.sample(NOISE, rng.randint(0, 2))
        for j in range(rng.randint(1, 2)):
            pieces.insert(rng.randint(0, len(pieces)), _payload(rng, f"m{k}x{j}"))
        seps = [" ; ", " && ", "\n", "\r\n", " \\\n&& ", " | ", "\n\n"]
        text = pieces[0]
        for piece in pieces[1:]:
            # nothing may follow a here-document's delimiter on its line, or it is no delimiter
            text += ("\n" if text.endswith("EOF") else rng.choice(seps)) + piece
        commands.append(text)
    return commands


# -- bash and keel ---------------------------------------------------------------------------------

def bash_ran(command: str, box: Path, env: dict[str, str]) -> set[str]:
    log = Path(env["KMARK_LOG"]).with_name(f"kmark-{abs(hash(command))}.log")   # a job left behind writes late
    log.unlink(missing_ok=True)
    subprocess.run(["bash", "-c", command], cwd=box, env={**env, "KMARK_LOG": str(log)}, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    return set(log.read_bytes().decode().split("\n")[:-1]) if log.exists() else set()   # a CR stays in its word


def keel_reads(command: str, box: Path) -> tuple[set[str], bool]:
    """The markers keel's reading names (their arguments), and whether it declined to read the line."""
    parts = analyze_command(command, box, home=box, confined=True)
    named = {" ".join(p.words[1:]) for p in parts if p.words[:1] == [MARK]}
    declined = any(not p.words and not p.outer and any(why in p.worst.reason for why in DECLINES) for p in parts)
    return named, declined


# keel's reading failed: it cannot parse the line, or bash may read it otherwise (an "ask")
DECLINES = ("cannot be checked", "may end elsewhere", "not where bash reads", "cannot read the way bash does")


def test_keel_reads_every_command_bash_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    box = tmp_path / "box"
    box.mkdir()
    env = _marker(box)
    rng = random.Random(33)
    ran = declined = 0
    missed: list[tuple[str, set[str], set[str]]] = []
    for command in generate(rng, SAMPLES):
        executed = bash_ran(command, box, env)
        if not executed:
            continue
        ran += 1
        named, refused = keel_reads(command, box)
        if refused:
            declined += 1
        elif not executed <= named:
            missed.append((command, executed, named))
    with capsys.disabled():
        print(f"\ndifferential: {SAMPLES} generated, bash ran a marker in {ran}, keel declined to read "
              f"{declined}, missed {len(missed)}")
    assert not missed, "bash ran commands keel's reading does not name:\n" + "\n".join(
        f"{c!r}: bash ran {sorted(e)}, keel read {sorted(n)}" for c, e, n in missed[:10])
    assert ran >= MIN_RAN, f"only {ran} generated lines ran a marker: too few to mean anything"
    assert declined <= MAX_DECLINED * ran, f"keel declined {declined} of {ran}: the test would mean little"


@pytest.mark.parametrize("command", [
    'echo "$\\\n(kmark a)"',                         # a continuation inside double quotes
    "cat <<EOF\n$\\\n(kmark a)\nEOF",                 # ... inside an unquoted here-document
    "echo SAFE \\\r\nkmark a",                        # an escaped CR-LF is no continuation
    "cat <<EOF\nx\nEO\\\nF\nkmark a\nEOF",            # the delimiter line joined
])
def test_the_issue_shapes_are_read_as_bash_runs_them(command: str, tmp_path: Path) -> None:
    env = _marker(tmp_path)
    executed = bash_ran(command, tmp_path, env)
    assert executed == {"a"}, "control: bash runs the hidden marker"
    named, declined = keel_reads(command, tmp_path)
    assert "a" in named and not declined


def test_the_generator_covers_every_shape() -> None:
    text = "\n".join(generate(random.Random(33), SAMPLES))
    for shape in ("\\\r\n", "\r\n", "<<'EOF'", "<<-EOF", "EO\\\nF", "$\\\n(", "<<EOF > o4", "`", "<(",
                  "2>/dev/null", "<<<x", "bash -c", "eval"):
        assert shape in text, shape


def test_marker_script_is_not_a_shell_builtin() -> None:
    assert os.path.basename(MARK) == MARK and subprocess.run(
        ["bash", "-c", f"type -t {MARK}"], capture_output=True, text=True).stdout.strip() == ""
