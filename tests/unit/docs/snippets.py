"""What README.md and docs/*.md tell a reader to type or copy, extracted for the doc tests.

A fenced block is a :class:`Block`: its info string says what it is (``sh`` and ``console``:
shell commands; ``ini``: a computed.conf fragment; ``ini zoo.cfg``, ``ini ironic.conf``, ``ini
systemd``, ``ini local.conf``: another program's file, named after the language so that renderers
still highlight it; ``json``, ``yaml``). A command is also any inline code span that starts with
one of :data:`INLINE_COMMANDS`. :func:`commands` turns a block or span into argument lists the
way a shell would read them (comments, ``$`` prompts and line continuations removed), with the
documentation's conventions resolved: ``a|b|c`` alternatives give one command each, ``[...]``
optional parts and ``...`` repetitions are taken as written once.
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Pages a reader copies from; every fenced block and command in them is checked.
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
# Inline code spans that are commands (other spans name options, files, states).
INLINE_COMMANDS = ("computed-manage ", "tools/", ".venv/bin/", "pip install", "tox ",
                   "oslo-config-generator ", "systemctl ", "promtool ")

FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`]*)$")
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
ALTERNATIVES = re.compile(r"^[a-z][a-z-]*(\|[a-z][a-z-]*)+$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    info: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def language(self) -> str:
        return self.info.split()[0] if self.info.split() else ""

    @property
    def names(self) -> str:
        """What the info string says after the language (``zoo.cfg``), or ''."""
        return " ".join(self.info.split()[1:])


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` (indented ones, in list items, included)."""
    found, lines = [], page.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening and opening["info"].strip():
            indent = len(opening["indent"])
            body = []
            index += 1
            while not lines[index].strip().startswith("```"):
                body.append(lines[index][indent:])
                index += 1
            found.append(Block(page, index - len(body), opening["info"].strip(),
                               "\n".join(body) + "\n"))
        index += 1
    return found


def inline_commands(page: Path) -> list[Block]:
    """Inline code spans outside fenced blocks that are commands, as one-line ``sh`` blocks."""
    found, fenced = [], False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for span in SPAN.findall(line):
            if span.startswith(INLINE_COMMANDS):
                found.append(Block(page, number, "sh inline", span + "\n"))
    return found


def _expand(words: list[str]) -> list[list[str]]:
    options = []
    for word in words:
        word = word.replace("[", "").replace("]", "").removesuffix("...")
        if not word:
            continue
        options.append(word.split("|") if ALTERNATIVES.match(word) else [word])
    return [list(choice) for choice in itertools.product(*options)]


def commands(block: Block) -> list[list[str]]:
    """The commands of a ``sh``/``console`` block, each as its words."""
    text = block.text.replace("\\\n", " ")
    result = []
    for line in text.splitlines():
        line = line.strip()
        if block.language == "console":
            if not line.startswith("$ "):
                continue  # output
            line = line[2:]
        lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
        if words:
            result += _expand(words)
    return result
