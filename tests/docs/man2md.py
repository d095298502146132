#!/usr/bin/env python3
"""tests/docs/man2md.py — docs/edgert.1 (roff, man macros) as Markdown, so the
CLI reference has one source: the manual page. docs/cli.md is this script's
output and is never edited by hand.

    python3 tests/docs/man2md.py docs/edgert.1 > docs/cli.md   # regenerate
    python3 tests/docs/man2md.py --write                       # the same
    python3 tests/docs/man2md.py --check                       # exit 1 if stale

--write and --check take the source tree's docs/edgert.1 and docs/cli.md
unless given MAN [MD]. The ctest entry docs_cli_md runs --check.

Handled: the man macros .TH .SH .SS .TP .IP .PP .LP .P .B .I .SM .SB and
their alternating forms (.BR .RB .BI .IB .IR .RI), .br .sp .nf .fi .RS .RE,
.\\" comments, and the escapes \\f[BIRP] (also \\f(CB, \\f[..]), \\- \\e \\&
\\| \\^ \\c "\\ " \\~ and the named characters below (\\(dq \\(em ...). An
unknown request is an error (exit 2, naming its line), never dropped quietly.

Fonts become Markdown: bold (what is typed literally) a code span, italic
(what stands for something) emphasis. SYNOPSIS and .nf blocks become fenced
code blocks; .TP/.IP items a list, the tag on the first line of its item and
the body below it.
"""
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REGEN = "python3 tests/docs/man2md.py docs/edgert.1 > docs/cli.md"
WIDTH = 100

NAMED = {"dq": '"', "aq": "'", "em": "\u2014", "en": "\u2013", "hy": "-", "mi": "-",
         "lq": "\u201c", "rq": "\u201d", "oq": "\u2018", "cq": "\u2019", "bu": "\u2022",
         "co": "\u00a9", "rg": "\u00ae", "tm": "\u2122", "de": "\u00b0", "mu": "\u00d7",
         "->": "\u2192", "<-": "\u2190", "ga": "`", "ti": "~", "ha": "^", "rs": "\\",
         "sl": "/", "ba": "|", "lh": "\u261c", "rh": "\u261e", "Fo": "\u00ab", "Fc": "\u00bb",
         "<=": "\u2264", ">=": "\u2265", "!=": "\u2260", "pl": "+", "eq": "="}
FONTS = {"B": "B", "I": "I", "R": "R", "CW": "B", "CB": "B", "CR": "R", "BI": "B", "1": "R",
         "2": "I", "3": "B"}


class ManError(Exception):
    pass


def split_args(s):
    """A macro's arguments: space-separated, "double quoted" with "" inside
    for a quote; escapes are kept for escaped_runs()."""
    args, cur, i, quoted, have = [], [], 0, False, False
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur.append(s[i:i + 2])
            i += 2
            have = True
            continue
        if quoted:
            if c == '"':
                if s[i + 1:i + 2] == '"':
                    cur.append('"')
                    i += 2
                    continue
                quoted = False
            else:
                cur.append(c)
        elif c == '"' and not cur:
            quoted, have = True, True
        elif c in " \t":
            if have:
                args.append("".join(cur))
                cur, have = [], False
        else:
            cur.append(c)
            have = True
        i += 1
    if have:
        args.append("".join(cur))
    return args


def escaped_runs(s, font, where):
    """[(text, font)] of one piece of roff text starting in `font`; \\f
    escapes switch fonts (\\fP: the previous one)."""
    out, buf, prev, i = [], [], font, 0

    def flush():
        if buf:
            out.append(("".join(buf), font))
            buf.clear()

    while i < len(s):
        c = s[i]
        if c != "\\":
            buf.append(c)
            i += 1
            continue
        n = s[i + 1:i + 2]
        i += 2
        if n == "f":
            if s[i:i + 1] == "(":
                name, i = s[i + 1:i + 3], i + 3
            elif s[i:i + 1] == "[":
                j = s.index("]", i)
                name, i = s[i + 1:j], j + 1
            else:
                name, i = s[i:i + 1], i + 1
            flush()
            if name in ("P", ""):
                font, prev = prev, font
            elif name in FONTS:
                prev, font = font, FONTS[name]
            else:
                raise ManError(f"{where}: unknown font \\f{name}")
        elif n == "(":
            name, i = s[i:i + 2], i + 2
            if name not in NAMED:
                raise ManError(f"{where}: unknown character \\({name}")
            buf.append(NAMED[name])
        elif n == "[":
            j = s.index("]", i)
            name, i = s[i:j], j + 1
            if name not in NAMED:
                raise ManError(f"{where}: unknown character \\[{name}]")
            buf.append(NAMED[name])
        elif n in ("-", "e", "\\"):
            buf.append("-" if n == "-" else "\\")
        elif n in (" ", "~", "0"):
            buf.append("\u00a0")
        elif n in ("&", "|", "^", ")", ",", "/", ":", "c"):
            pass
        elif n == '"':  # comment to the end of the line
            break
        elif n in (".", "'"):
            buf.append(n)
        else:
            raise ManError(f"{where}: unknown escape \\{n}")
    flush()
    return out


ALTERNATING = {"BR": "BR", "RB": "RB", "BI": "BI", "IB": "IB", "IR": "IR", "RI": "RI"}
SINGLE = {"B": "B", "I": "I", "SB": "B", "SM": "R"}


def macro_runs(name, argstr, where):
    args = split_args(argstr)
    runs = []
    if name in SINGLE:
        runs += escaped_runs(" ".join(args), SINGLE[name], where)
    else:
        fonts = ALTERNATING[name]
        for k, a in enumerate(args):
            runs += escaped_runs(a, fonts[k % 2], where)
    return runs


# ---- Markdown rendering --------------------------------------------------------------

def md_escape(t):
    t = t.replace("\\", "\\\\")
    for ch in "*`[]<>~":
        t = t.replace(ch, "\\" + ch)
    # _ only where it could open or close emphasis (not inside a word)
    return re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", t)


def code_span(t):
    ticks = "`"
    while ticks in t:
        ticks += "`"
    pad = " " if t.startswith("`") or t.endswith("`") else ""
    return f"{ticks}{pad}{t}{pad}{ticks}"


def render_inline(runs):
    merged = []
    for text, font in runs:
        if merged and merged[-1][1] == font:
            merged[-1] = (merged[-1][0] + text, font)
        elif text:
            merged.append((text, font))
    out = []
    for text, font in merged:
        if font == "R":
            out.append(md_escape(text))
            continue
        core = text.strip(" \u00a0")
        if not core:
            out.append(text)
            continue
        lead = text[:len(text) - len(text.lstrip(" \u00a0"))]
        trail = text[len(text.rstrip(" \u00a0")):]
        body = code_span(core) if font == "B" else "*" + md_escape(core) + "*"
        out.append(lead + body + trail)
    s = "".join(out)
    s = re.sub(r"[ \t]+", " ", s).strip()
    return s.replace("\u00a0", " ")  # a code span keeps it as a space


def plain(runs):
    return "".join(t for t, _ in runs).replace("\u00a0", " ")


BLOCK_START = re.compile(r"^(?:[-+*>#]|\d+[.)])(?:\s|$)|^[=-]+\s*$|^ {0,3}(?:```|~~~)")


def wrap(text, indent=""):
    if not text:
        return []
    # a code span stays on one line: its spaces are not break points
    text = re.sub(r"(`+)(.+?)\1", lambda m: m.group(0).replace(" ", "\x01"), text)
    lines = [ln.replace("\x01", " ") for ln in
             textwrap.wrap(text, WIDTH - len(indent), break_long_words=False,
                           break_on_hyphens=False)]
    out = []
    for ln in lines:  # a continuation line must not start a Markdown block
        if out and BLOCK_START.match(ln):
            out[-1] += " " + ln
        else:
            out.append(ln)
    if out and BLOCK_START.match(out[0]):
        out[0] = "\\" + out[0]
    return [indent + ln for ln in out]


class Converter:
    def __init__(self, src_name):
        self.src = src_name
        self.out = []          # Markdown lines
        self.para = []         # runs of the paragraph being filled
        self.code = None       # lines of a no-fill/synopsis block, else None
        self.tag_next = False  # the next text line is a .TP tag
        self.tag = None        # runs of the current item's tag
        self.item = False      # inside a list item's body
        self.indent = 0        # .RS depth inside an item
        self.section = ""
        self.title = None
        self.bullet = False    # the next paragraph opens a tagless list item

    # paragraphs -------------------------------------------------------------------
    def blank(self):
        if self.out and self.out[-1] != "":
            self.out.append("")

    def add_runs(self, runs):
        if self.tag_next:
            self.tag = (self.tag or []) + runs
            self.tag_next = False
            self.emit_tag()
            return
        if self.code is not None:
            if self.section == "SYNOPSIS":  # filled: lines joined, .br breaks
                if self.code and not self.code.endswith("\n"):
                    self.code += " "
                self.code += plain(runs)
            else:  # no-fill: line for line
                self.code += plain(runs) + "\n"
            return
        if self.para:
            self.para.append((" ", "R"))
        self.para += runs

    def item_indent(self):
        return "  " * (self.indent + (1 if self.item else 0))

    def end_para(self):
        if self.para:
            text = render_inline(self.para)
            self.para = []
            if text:
                self.blank()
                lines = wrap(text, self.item_indent())
                if self.bullet:
                    lines[0] = "- " + lines[0][2:]
                    self.bullet = False
                self.out += lines

    def end_code(self):
        if self.code is None:
            return
        lines = self.code.splitlines()
        self.code = None
        while lines and not lines[-1].strip():
            lines.pop()
        if not lines:
            return
        ind = self.item_indent()
        self.blank()
        self.out.append(ind + "```")
        self.out += [(ind + ln).rstrip() for ln in lines]
        self.out.append(ind + "```")

    def flush(self):
        self.end_para()
        self.end_code()

    def end_list(self):
        self.flush()
        self.item = False
        self.indent = 0

    def emit_tag(self):
        text = render_inline(self.tag) or "\u00a0"
        self.tag = None
        self.blank()
        lines = wrap(text, "  ")
        self.out += ["- " + lines[0][2:]] + lines[1:]
        self.item = True

    # requests ---------------------------------------------------------------------
    def request(self, name, rest, where):
        if name in ("TH",):
            a = split_args(rest)
            self.title = (plain(escaped_runs(a[0], "R", where)).lower() if a else "",
                          a[1] if len(a) > 1 else "", a[4] if len(a) > 4 else "")
            t, sec, manual = self.title
            self.out += [f"# {t}({sec})", ""]
            self.out += wrap(f"The manual page {t}({sec}), {manual or 'section ' + sec}, as "
                             f"Markdown; installed, it is `man {sec} {t}`.")
        elif name in ("SH", "SS"):
            self.end_list()
            title = plain(escaped_runs(" ".join(split_args(rest)), "R", where)).strip()
            self.section = title if name == "SH" else self.section
            self.blank()
            heading = title[:1].upper() + title[1:].lower() if title.isupper() else title
            self.out.append(("## " if name == "SH" else "### ") + heading)
            if name == "SH" and title == "SYNOPSIS":
                self.code = ""
        elif name in ("PP", "LP", "P"):
            self.end_list()
            if self.section == "SYNOPSIS":
                self.code = "" if self.code is None else self.code + "\n"
        elif name in ("TP", "IP"):
            self.flush()
            self.indent = 0
            self.item = False
            if name == "TP":
                self.tag_next = True
            else:
                a = split_args(rest)
                self.tag = escaped_runs(a[0], "R", where) if a else []
                if a and plain(self.tag).strip() in ("\u2022", "*", "-"):
                    self.tag = []
                if self.tag:
                    self.emit_tag()
                else:  # a bullet: its first paragraph on the bullet's line
                    self.item = True
                    self.bullet = True
        elif name == "br":
            if self.code is not None:
                self.code += "\n"
            elif self.para:
                self.para.append(("\u2028", "R"))  # becomes a hard break below
        elif name == "sp":
            self.flush()
        elif name == "nf":
            self.end_para()
            if self.code is None:
                self.code = ""
        elif name == "fi":
            if self.section != "SYNOPSIS":
                self.end_code()
        elif name == "RS":
            self.flush()
            self.indent += 1
        elif name == "RE":
            self.flush()
            self.indent = max(0, self.indent - 1)
        elif name in SINGLE or name in ALTERNATING:
            runs = macro_runs(name, rest, where)
            if not split_args(rest):
                raise ManError(f"{where}: .{name} without arguments is not handled")
            self.add_runs(runs)
        else:
            raise ManError(f"{where}: request .{name} is not handled by {os.path.basename(__file__)}")

    def convert(self, text):
        for n, line in enumerate(text.split("\n"), 1):
            where = f"{self.src}:{n}"
            if line.startswith(('.\\"', "'\\\"")) or line in (".", "'"):
                continue
            m = re.match(r"^[.']\s*([A-Za-z]+)\s*(.*)$", line)
            if m:
                self.request(m.group(1), m.group(2), where)
            elif line.strip() == "":
                self.flush()  # a blank line is a paragraph break in roff
            else:
                self.add_runs(escaped_runs(line, "R", where))
        self.flush()
        lines = [ln.rstrip() for ln in self.out]
        text = "\n".join(lines).strip("\n") + "\n"
        return re.sub(r" ?\u2028 ?", "\\\\\n", text)


def header(src):
    return (f"<!-- Generated from {src} by tests/docs/man2md.py: do not edit by hand. "
            f"Regenerate with: {REGEN} -->\n")


def convert(man_path, src_label="docs/edgert.1"):
    with open(man_path, encoding="utf-8") as f:
        text = f.read()
    return header(src_label) + Converter(src_label).convert(text)


def main(argv):
    args = argv[1:]
    mode = "print"
    if args and args[0] in ("--write", "--check"):
        mode, args = args[0][2:], args[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    man = args[0] if args else os.path.join(ROOT, "docs", "edgert.1")
    md = args[1] if len(args) > 1 else os.path.join(ROOT, "docs", "cli.md")
    if len(args) > (1 if mode == "print" else 2):
        print("usage: man2md.py [--write|--check] [MAN [MD]]", file=sys.stderr)
        return 2
    try:
        text = convert(man)
    except (ManError, OSError, ValueError) as e:
        print(f"man2md.py: {e}", file=sys.stderr)
        return 2
    if mode == "print":
        sys.stdout.write(text)
        return 0
    if mode == "write":
        with open(md, "w", encoding="utf-8") as f:
            f.write(text)
        return 0
    try:
        with open(md, encoding="utf-8") as f:
            old = f.read()
    except OSError as e:
        old = None
        print(f"docs/cli.md: cannot read it: {e}")
    if old == text:
        print(f"{md}: matches {man}")
        return 0
    if old is not None:
        import difflib
        diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(), md,
                                         "man2md.py " + man, lineterm="", n=1))
        sys.stdout.write("\n".join(diff[:80]) + "\n")
        if len(diff) > 80:
            print(f"... ({len(diff) - 80} more diff lines)")
    print(f"FAILED: {md} is not what tests/docs/man2md.py makes of {man}: docs/cli.md is "
          f"generated, never edited by hand. Regenerate it (from the source tree's root):\n"
          f"    {REGEN}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
