"""Which arguments the terminal's read-only commands accept.

A command name on the allowlist is not enough: ``sort -o FILE`` writes any file,
``sort --compress-program=PROG`` runs one, ``date -s`` sets the clock. Each command
below has a rule naming the options that run a program, write a file or change the
system; those are refused, as are operands that would do the same (``uniq IN OUT``,
``hostname NAME``, ``date MMDDhhmm``). The rules apply to these commands whenever
they run, whoever put them on the allowlist; other commands an operator allows have
no rule and rely on the sandbox alone. docs/tools.md lists the rules per command.

Options are read the way GNU ``getopt_long`` reads them: short options cluster
(``-uo FILE``), a value may be attached (``-oFILE``, ``--output=FILE``) or follow,
a long option may be abbreviated (``--out``), options may follow operands, and
``--`` ends them. An abbreviation of a refused option is refused too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tools.base import ToolError


class ArgumentRefused(ToolError):
    pass


OperandCheck = Callable[[list[str]], str | None]


@dataclass(frozen=True)
class CommandRule:
    # Refused options: "-o" (short) and "--output" (long; abbreviations refused too).
    refused: frozenset[str] = frozenset()
    why: str = ""
    # Short options that take a value (attached or the next argument).
    short_values: str = ""
    # Short options whose value, if any, is attached (``-I``, ``-Iseconds``).
    short_optional: str = ""
    # Long options that take a value (``--name VALUE`` or ``--name=VALUE``).
    long_values: frozenset[str] = frozenset()
    operands: OperandCheck | None = None
    # ps: BSD-style option clusters (no dash) are options too; these letters are refused.
    bsd_refused: str = ""


def _at_most(count: int, why: str) -> OperandCheck:
    def check(operands: list[str]) -> str | None:
        return why if len(operands) > count else None

    return check


def _date_operands(operands: list[str]) -> str | None:
    if any(not operand.startswith("+") for operand in operands):
        return "an operand that is not a +FORMAT sets the clock"
    return None


RULES: dict[str, CommandRule] = {
    "date": CommandRule(
        refused=frozenset({"-s", "--set"}),
        why="sets the system clock",
        short_values="dfr",
        short_optional="I",
        long_values=frozenset({"--date", "--file", "--reference", "--rfc-3339"}),
        operands=_date_operands,
    ),
    "diff": CommandRule(
        refused=frozenset({"-l", "--paginate"}),
        why="runs the output through the program pr",
        short_values="CDFIUWLSXx",
        long_values=frozenset(
            {
                "--label",
                "--ignore-matching-lines",
                "--show-function-line",
                "--starting-file",
                "--exclude",
                "--exclude-from",
                "--from-file",
                "--to-file",
                "--width",
                "--tabsize",
                "--horizon-lines",
                "--ifdef",
            }
        ),
    ),
    "file": CommandRule(
        refused=frozenset({"-C", "--compile", "-z", "-Z", "--uncompress", "--uncompress-noreport"}),
        why="writes a compiled magic file (-C) or runs decompressors (-z, -Z)",
        short_values="eFfmP",
        long_values=frozenset(
            {"--exclude", "--exclude-quiet", "--separator", "--files-from", "--magic-file"}
        ),
    ),
    "hostname": CommandRule(
        refused=frozenset({"-F", "--file", "-b", "--boot"}),
        why="sets the host name",
        operands=_at_most(0, "an operand sets the host (or NIS domain) name"),
    ),
    "ps": CommandRule(
        short_values="CGgOopqstUu",
        long_values=frozenset(
            {
                "--cols",
                "--columns",
                "--format",
                "--group",
                "--Group",
                "--pid",
                "--ppid",
                "--quick-pid",
                "--rows",
                "--lines",
                "--sid",
                "--sort",
                "--tty",
                "--user",
                "--User",
                "--width",
            }
        ),
        bsd_refused="e",
        why="shows the environment of processes",
    ),
    "sort": CommandRule(
        refused=frozenset({"-o", "--output", "--compress-program", "-T", "--temporary-directory"}),
        why="writes a file (-o, -T) or runs a program (--compress-program)",
        short_values="kSt",
        long_values=frozenset(
            {
                "--key",
                "--buffer-size",
                "--field-separator",
                "--batch-size",
                "--parallel",
                "--random-source",
                "--files0-from",
            }
        ),
    ),
    "uniq": CommandRule(
        short_values="fsw",
        long_values=frozenset({"--skip-fields", "--skip-chars", "--check-chars"}),
        operands=_at_most(1, "a second operand is an output file uniq writes"),
    ),
}
for _name in ("cat", "df", "du", "echo", "free", "grep", "head", "ls", "pwd", "stat", "tail"):
    RULES[_name] = CommandRule()  # reads only: nothing to refuse
for _name in ("uname", "uptime", "wc", "whoami"):
    RULES[_name] = CommandRule()


def _refused_long(name: str, rule: CommandRule) -> str | None:
    """The refused option ``name`` is (or abbreviates), if any."""
    for refused in rule.refused:
        if refused.startswith("--") and refused.startswith(name) and len(name) > 2:
            return refused
    return None


def _takes_value(name: str, rule: CommandRule) -> bool:
    matches = [opt for opt in rule.long_values if opt.startswith(name)]
    return name in rule.long_values or len(matches) == 1


def _refuse(command: str, option: str, rule: CommandRule) -> ArgumentRefused:
    return ArgumentRefused(
        f"'{command} {option}' is not allowed: it {rule.why}. The terminal runs read-only "
        "commands; see docs/tools.md for what each accepts."
    )


def check_arguments(command: str, args: Sequence[str]) -> None:
    """Refuse what ``command``'s rule forbids; commands without a rule pass unchecked."""
    rule = RULES.get(command)
    if rule is None:
        return
    operands: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            operands += args[index:]
            break
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            if _refused_long(name, rule):
                raise _refuse(command, name, rule)
            if "=" not in arg and _takes_value(name, rule):
                index += 1
            continue
        if arg.startswith("-") and arg != "-":
            for position, letter in enumerate(arg[1:], start=1):
                if f"-{letter}" in rule.refused:
                    raise _refuse(command, f"-{letter}", rule)
                if letter in rule.short_optional:
                    break
                if letter in rule.short_values:
                    if position == len(arg) - 1:
                        index += 1  # the value is the next argument
                    break
            continue
        bsd_options = rule.bsd_refused and re.fullmatch(r"[A-Za-z]+", arg)
        if bsd_options and any(letter in rule.bsd_refused for letter in arg):
            raise _refuse(command, arg, rule)
        operands.append(arg)
    if rule.operands is not None and (why := rule.operands(operands)):
        raise ArgumentRefused(f"'{command}' refused: {why}. The terminal runs read-only commands.")


def _process_path(word: str, cwd: str) -> bool:
    path = os.path.normpath(os.path.join(cwd, word.split("=", 1)[-1]))
    parts = path.split(os.sep)
    return len(parts) > 2 and parts[1] == "proc" and (parts[2].isdigit() or "self" in parts[2])


def check_no_process_paths(args: Sequence[str], cwd: str) -> None:
    """Without the sandbox: no argument may name another process's files in /proc."""
    for arg in args:
        if _process_path(arg, cwd):
            raise ArgumentRefused(
                f"{arg!r} names a process's files in /proc, which hold the server's secrets; "
                "this is refused when tools run without the sandbox"
            )
