"""Judges for system, network and shell-state commands: disks and power (deny), kill, netcat
and socat with exec (deny), downloaders and remote copies (network, ask), and the builtins that
run strings as code or change what names mean (eval, trap, alias, source: ask, code judged too).
"""

from __future__ import annotations

import re

from keel.policy.shell.commands import (
    Finding,
    Invocation,
    Judge,
    JudgeEnv,
    allow,
    ask,
    deny,
    judge_write,
)
from keel.policy.shell.facts import has, options, values_of
from keel.policy.shell.parse import Word
from keel.policy.shell.unwrap import env_name_risk

_DISK_AND_POWER = frozenset({"mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk",
                             "parted", "wipefs", "mount", "umount", "swapon", "swapoff", "shutdown", "reboot",
                             "halt", "poweroff", "kexec", "crontab", "at", "batch", "insmod", "rmmod",
                             "telinit", "killall5"})


def _system(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    return [deny(f"{inv.name} changes disks, power state or scheduled jobs", destructive=True)]


def _init(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    if set(inv.values) & {"0", "6", "1", "s", "S"}:
        return [deny("init changes the run level (shutdown/reboot)", destructive=True)]
    return [ask("init")]


def _systemctl(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    if set(inv.values) & {"poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "rescue", "emergency"}:
        return [deny("systemctl changes the power state", destructive=True)]
    return [ask("systemctl manages services")]


def _kill(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    values = inv.values
    i = 0
    if values and values[0] in ("-s", "-n"):
        i = 2                                   # kill -s SIG PID...
    elif values and values[0].startswith("-") and values[0] != "--":
        i = 1                                   # kill -9 PID...: the first dash word is the signal
    if i < len(values) and values[i] == "--":
        i += 1
    if inv.name == "kill" and "-1" in values[i:]:
        return [deny("kill -1 signals every process", destructive=True)]
    return [ask(f"{inv.name} stops processes", destructive=True)]


def _netcat(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    if has(options(inv.name, inv.args), "-e", "-c", "--exec", "--sh-exec", "--lua-exec"):
        return [deny(f"{inv.name} -e gives a network peer a shell")]
    return [ask(f"{inv.name} opens network connections", network=True)]


def _socat(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    if any(re.search(r"(?i)(^|[,:!])(exec|system)[:,]", v) for v in inv.values):
        return [deny("socat exec: runs a program for a network peer")]
    return [ask("socat opens network connections", network=True)]


def _downloader(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    out = [ask(f"{inv.name} uses the network", network=True)]
    for _option, word in options(inv.name, inv.args).writes:      # -o FILE, --cookie-jar F ... (facts.toml)
        if word.value != "-":
            out += judge_write(env, word, inv.cwds)
    return out


def _remote_copy(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    operands = options(inv.name, inv.args).operands
    out = [ask(f"{inv.name} uses the network", network=True, destructive=True)]
    if operands and ":" not in operands[-1].value and inv.name in ("scp", "rsync"):
        out += judge_write(env, operands[-1], inv.cwds)
    return out


def _eval(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    code = " ".join(inv.values)
    joined = Word(code, code, tuple(p for w in inv.args for p in w.params), tuple(s for w in inv.args for s in w.subs))
    env.sub_code(joined, inv.cwds, "eval")
    return [ask("eval runs a string as shell code")]


def _trap(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    operands = options("trap", inv.args).operands
    if len(operands) >= 2:
        env.sub_code(operands[0], inv.cwds, "trap")
        return [ask("trap runs shell code later")]
    return [allow("lists traps")]


def _alias(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    for word in inv.args:
        if "=" in word.value:
            code = word.value.split("=", 1)[1]
            env.sub_code(Word(code, code, word.params, word.subs), inv.cwds, "alias")
    return [ask("alias changes what command names mean")]


def _declare(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """export/declare/local: a nameref (-n) or a name only known at run time cannot be followed;
    an exported name must be known-harmless; printing them all reads the environment."""
    flags = "".join(w.value[1:] for w in inv.args if w.value.startswith(("-", "+")) and w.literal)
    exported = inv.name == "export" or "x" in flags
    names = [w for w in inv.args if not (w.value.startswith(("-", "+")) and w.literal)]
    if "n" in flags and inv.name != "export":
        return [ask(f"{inv.name} -n makes a reference to another variable, which cannot be followed")]
    if not names and (inv.name == "export" or "p" in flags or "x" in flags or not flags):
        return [allow(f"{inv.name} prints variables"), Finding("allow", "prints the environment", secret=True)]
    out = [allow(f"{inv.name} sets shell variables")]
    for word in names:
        if word.literal and re.search(r"\$\(|`|\$\{|\$\[", word.value) and "=(" in word.value:
            # declare 'a=([0]=$(cmd))': declare evaluates a quoted compound assignment again
            out.append(ask(f"{inv.name} {word.raw}: declare expands a quoted array value again and runs what is in it",
                           lift=None))
        if "=" in word.value:
            out += env.assignment(word, inv.cwds, exported=exported)
        elif not word.literal:
            out.append(ask(f"{inv.name} of {word.raw!r}, a name only known when it runs"))
        elif exported:
            out += env.assignment(Word(word.value + "=", word.raw), inv.cwds, exported=True)
    return out


def _prints_environment(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    return [allow(f"{inv.name} prints the environment"), Finding("allow", "prints the environment", secret=True)]


def _set(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    """``set -e -o pipefail`` is fine; ``set -k``/``-a`` change which assignments reach programs."""
    values = [w.value for w in inv.args]
    if not values:
        return [allow("set prints variables"), Finding("allow", "prints the environment", secret=True)]
    safe_o = {"errexit", "nounset", "xtrace", "pipefail", "verbose", "noclobber", "noglob", "errtrace", "posix"}
    for i, value in enumerate(values):
        if value == "--":
            break
        if re.fullmatch(r"[-+][euxvfCnhbBHmPET]*o", value):
            if i + 1 < len(values) and values[i + 1] not in safe_o:
                return [ask(f"set -o {values[i + 1]} changes how the shell runs later commands")]
        elif value.startswith(("-", "+")) and not re.fullmatch(r"[-+][euxvfCnhbBHmPET]+", value):
            return [ask(f"set {value} changes how the shell runs later commands (-k, -a export assignments)")]
    return [allow("set changes shell options")]


def _names_assigned(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    """printf -v NAME / read NAME: a variable gets a value the policy cannot see."""
    parsed = options(inv.name, inv.args)
    names = values_of(parsed, "-v", "-a") + (parsed.operands if inv.name == "read" else [])
    out = [allow(f"{inv.name} only prints or reads input")]
    if parsed.problem and "may expand to an option" in parsed.problem:
        # printf "$FMT" x: a first word built at run time may be `-v NAME`, which assigns NAME
        out.append(ask(f"{inv.name}: {parsed.problem}", lift=None))
    for word in names:
        if not word.literal:
            out.append(ask(f"{inv.name} assigns {word.raw!r}, a variable named only at run time", lift=None))
        risk = env_name_risk(word.value)
        if risk is not None:
            out.append(Finding(risk[0], risk[1], lift=None))
    return out


def _shopt(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    if "expand_aliases" in inv.values or "extdebug" in inv.values:
        return [deny("shopt expand_aliases/extdebug lets later commands mean something else")]
    return [allow("shopt")]


def _hash(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    if has(options("hash", inv.args), "-p"):
        return [deny("hash -p makes one command name run another program")]
    return [allow("hash")]



def _ulimit(_inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    """``ulimit -n 4096``: limits of this shell and what it starts (raising a hard limit needs root)."""
    return [allow("ulimit reads or sets this shell's resource limits")]


def _ps(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    """``ps aux``, ``ps -ef``: lists processes; BSD-style ``e`` (``ps eww``) also prints their
    environments, keel's own API key among them where no PID namespace hides keel."""
    bsd = "".join(v for v in inv.values if not v.startswith("-") and re.fullmatch(r"[a-zA-Z]+", v))
    out = [allow("ps lists processes")]
    if "e" in bsd:
        out.append(ask("ps e prints the environment of processes", lift=None, secret=True))
    return out


def _fixed(decision: str, what: str) -> Judge:
    def judge(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
        return [Finding(decision, f"{inv.name} {what}")]

    return judge


JUDGES: dict[str, Judge] = {
    "init": _init, "systemctl": _systemctl, "kill": _kill, "pkill": _kill, "killall": _kill,
    "nc": _netcat, "ncat": _netcat, "netcat": _netcat, "socat": _socat,
    "curl": _downloader, "wget": _downloader, "aria2c": _downloader,
    "scp": _remote_copy, "rsync": _remote_copy, "ssh": _remote_copy, "sftp": _remote_copy,
    "eval": _eval, "trap": _trap, "alias": _alias, "shopt": _shopt, "hash": _hash,
    "export": _declare, "declare": _declare, "typeset": _declare, "local": _declare, "readonly": _declare,
    "printf": _names_assigned, "read": _names_assigned, "set": _set,
    "env": _prints_environment, "printenv": _prints_environment, "ulimit": _ulimit, "ps": _ps,
}
JUDGES.update({name: _system for name in _DISK_AND_POWER})
JUDGES.update({name: _fixed("ask", "runs another file in this shell") for name in ("source", ".")})
JUDGES.update({name: _fixed("ask", "is interactive") for name in ("less", "more", "most", "vi", "vim", "nvim",
                                                                 "nano", "emacs", "man", "top", "htop")})
JUDGES.update({name: _fixed("ask", "changes the shell itself") for name in ("history",)})
JUDGES["enable"] = lambda inv, _env: ([deny("enable -f loads code into the shell")] if any(
    v.startswith("-") and "f" in v for v in inv.values) else [ask("enable changes the shell's builtins")])


def judge_mkfs_family(name: str) -> Judge | None:
    """mkfs.ext4 and friends are one family."""
    return _system if re.fullmatch(r"mkfs\.\w+|mkdosfs|mke2fs|mkswap", name) else None
