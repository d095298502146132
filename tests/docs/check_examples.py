#!/usr/bin/env python3
"""tests/docs/check_examples.py — every code example of README.md and docs/**/*.md,
compiled, run or checked against the built tree (ctest: docs_examples).

    python3 tests/docs/check_examples.py --source SRC --cli BUILD/bin/edgert \\
        --lib BUILD/lib/libedgert.so.X [--runner-lib BUILD/lib/libedgert-runner.so.X] \\
        [--cc cc] [--include DIR]... [--python PY] [--pythonpath BUILD/python] [FILE.md...]

Fenced blocks (``` or ~~~, at any indentation, so inside list items too), by
the first word of their info string:

- c: a complete translation unit. Compiled with CC -std=c11 -Wall -Wextra
  -Werror against the public headers (each --include: include/, the build
  tree's generated include/, runner/include, the plugin kit's folders). A block
  that defines main() is linked with libedgert (and libedgert-runner when it
  includes edgert/runner.h), rpath set, and run from the source tree's root
  (60 s; exit 0 required); one without main() (plugin code, as in
  writing-a-backend.md) is compiled with -c -fPIC only.
- python: run with PY (the Python tests' interpreter, the .ci/deps venv),
  PYTHONPATH=--pythonpath and EDGERT_LIBRARY=--lib, from the source tree's
  root (120 s; exit 0 required). Without a PY that can import numpy (what
  the package needs), the Python blocks are reported SKIPPED.
- sh, bash, shell, console: every command line that runs the CLI (edgert,
  build/bin/edgert, any .../edgert; in console blocks the lines after a
  "$ " prompt) is checked without running it: its command exists, and each
  long option is one `edgert COMMAND --help` lists (or `edgert --help` lists
  as common). `edgert probe|list|select` lines that use only --priority,
  --explain[=full], --json, --backend and --device with a file of the source
  tree, and nothing for the shell to expand, are also run (exit 0 or 3).
  Lines that build, install or run other tools are not checked.
- yaml in docs/manifest.md and docs/device-profile.md: a block with `name:`
  and `abi:` is a manifest, loaded by `edgert list --manifests DIR --json`; one
  with `profile_version:` a device profile, read by `edgert probe --device
  FILE --json`: no error diagnostic and exit 0 required.
- anything else (no language, text, json, cmake, ...) is not checked.

A failure names the doc file and the line of the block (or command) with the
compiler's, the program's or the CLI's output; exit 1 on any failure. Without
a C compiler, the CLI or the built library: "SKIPPED: docs_examples: all:
<why>" and exit 77 (the ctest entry's SKIP_RETURN_CODE; tests/test_util.h).

The commands run with their own HOME and XDG folders (a temporary folder,
inside ctest's hermetic one when run there) and without EDGERT_MANIFEST_PATH,
EDGERT_ADD_MANIFEST_PATH, EDGERT_DISABLE, EDGERT_PRIORITY, EDGERT_BACKEND,
EDGERT_LOG, as ctest's hermetic tests do.
"""
import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

NAME = "docs_examples"
SKIP = 77
SCRUBBED = ("EDGERT_MANIFEST_PATH", "EDGERT_ADD_MANIFEST_PATH", "EDGERT_DISABLE",
            "EDGERT_PRIORITY", "EDGERT_BACKEND", "EDGERT_LOG")
SHELL_LANGS = {"sh", "bash", "shell", "console", "shell-session", "zsh"}
RUNNABLE = {"probe", "list", "select"}
RUN_OPTS = {"--priority": True, "--explain": False, "--json": False, "--backend": True,
            "--device": True}  # option: takes a value
YAML_CHECKED = {"manifest.md", "device-profile.md"}
OUTPUT_TAIL = 4000


class Block:
    def __init__(self, path, line, lang, info, lines):
        self.path, self.line, self.lang, self.info, self.lines = path, line, lang, info, lines

    @property
    def text(self):
        return "".join(s + "\n" for s in self.lines)


FENCE = re.compile(r"^(\s*(?:>\s*)?)(`{3,}|~{3,})(.*)$")


def blocks_of(path, rel):
    """The fenced code blocks of a Markdown file, with the line of each fence."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or (m.group(2)[0] == "`" and "`" in m.group(3)):
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        width = len(indent.replace(">", " "))
        close = re.compile(r"^\s*(?:>\s*)?" + re.escape(fence[0]) + "{" + str(len(fence)) +
                           r",}\s*$")
        body, j = [], i + 1
        while j < len(lines) and not close.match(lines[j]):
            ln = lines[j]
            if indent.strip().startswith(">"):
                ln = re.sub(r"^\s*>\s?", "", ln)
            else:  # the fence's own indentation is not part of the code
                k = 0
                while k < width and k < len(ln) and ln[k] == " ":
                    k += 1
                ln = ln[k:]
            body.append(ln)
            j += 1
        lang = re.sub(r"^\{?\.?", "", info.split()[0]).rstrip("}").lower() if info else ""
        lang = lang.split(",")[0]
        out.append(Block(rel, i + 1, lang, info, body))
        i = j + 1
    return out


def tail(s):
    s = s if isinstance(s, str) else s.decode("utf-8", "replace")
    return s if len(s) <= OUTPUT_TAIL else "...\n" + s[-OUTPUT_TAIL:]


def indent(s):
    return "".join("    " + ln + "\n" for ln in s.rstrip("\n").split("\n")) if s.strip() else ""


class Checker:
    def __init__(self, a, env, work):
        self.a, self.env, self.work = a, env, work
        self.failures = []
        self.skips = []
        self.counts = {}       # file -> {kind: n}
        self.help = {}         # command -> set of long options
        self.global_opts = None
        self.commands = None
        self.takes_value = set()
        self.python_ok = None
        self.n = 0

    def count(self, path, kind):
        c = self.counts.setdefault(path, {})
        c[kind] = c.get(kind, 0) + 1

    def fail(self, where, why, output=""):
        self.failures.append(f"FAILED: {where}: {why}\n{indent(tail(output))}")
        print(self.failures[-1], end="", flush=True)

    def run(self, argv, timeout, cwd=None, env=None):
        try:
            p = subprocess.run(argv, cwd=cwd or self.a.source, env=env or self.env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=timeout)
            return p.returncode, p.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            return None, (e.stdout or b"").decode("utf-8", "replace") + \
                f"\n(killed after {timeout} s)"
        except OSError as e:
            return None, str(e)

    # ---- C -----------------------------------------------------------------------
    def check_c(self, b):
        where = f"{b.path}:{b.line}"
        self.n += 1
        src = os.path.join(self.work, f"block{self.n}.c")
        with open(src, "w", encoding="utf-8") as f:
            # the compiler's messages name the doc's own file and lines
            f.write(f'#line {b.line + 1} "{b.path}"\n')
            f.write(b.text)
        has_main = re.search(r"\bint\s+main\s*\(", b.text) is not None
        cc = shlex.split(self.a.cc)
        flags = ["-std=c11", "-Wall", "-Wextra", "-Werror"] + shlex.split(self.a.cflags)
        for d in self.a.include:
            flags += ["-I", d]
        if not has_main:
            rc, out = self.run(cc + flags + ["-fPIC", "-c", src, "-o", src[:-2] + ".o"], 120)
            if rc != 0:
                self.fail(where, "```c block (no main: compiled with -c -fPIC) does not compile "
                          f"({' '.join(cc)} -std=c11 -Wall -Wextra -Werror, public headers)",
                          out)
            self.count(b.path, "c compiled")
            return
        exe = src[:-2]
        libs = [self.a.lib]
        if re.search(r"#\s*include\s*[<\"]edgert/runner\.h[>\"]", b.text) and self.a.runner_lib:
            libs.insert(0, self.a.runner_lib)
        rpath = [f"-Wl,-rpath,{os.path.dirname(os.path.abspath(x))}" for x in libs]
        rc, out = self.run(cc + flags + [src, "-o", exe] + libs + rpath + ["-lm"], 120)
        if rc != 0:
            self.fail(where, "```c block does not compile and link against libedgert", out)
            self.count(b.path, "c compiled")
            return
        rc, out = self.run([exe], 60)
        if rc != 0:
            self.fail(where, f"```c block's program exited {rc} (0 required)", out)
        self.count(b.path, "c compiled and run")

    # ---- Python ------------------------------------------------------------------
    def python_usable(self):
        if self.python_ok is None:
            py = self.a.python
            if self.a.no_python:
                self.python_ok = self.a.no_python
            elif not py or not os.access(py, os.X_OK):
                self.python_ok = f"{py or '(none given)'} is not an interpreter"
            else:
                rc, out = self.run([py, "-c", "import numpy"], 60)
                self.python_ok = True if rc == 0 else \
                    f"{py} cannot import numpy (run .ci/deps, which fills its venv)"
        return self.python_ok

    def check_python(self, b):
        where = f"{b.path}:{b.line}"
        why = self.python_usable()
        if why is not True:
            self.skips.append(f"SKIPPED: {NAME}: {where}: ```python block not run: {why}")
            print(self.skips[-1], flush=True)
            self.count(b.path, "python skipped")
            return
        self.n += 1
        src = os.path.join(self.work, f"block{self.n}.py")
        with open(src, "w", encoding="utf-8") as f:
            f.write(b.text)
        env = dict(self.env, PYTHONDONTWRITEBYTECODE="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.a.pythonpath,
                                                        env.get("PYTHONPATH")) if p)
        env["EDGERT_LIBRARY"] = os.path.abspath(self.a.lib)
        rc, out = self.run([self.a.python, src], 120, env=env)
        if rc != 0:
            self.fail(where, f"```python block exited {rc} (0 required; {self.a.python}, "
                      f"PYTHONPATH={self.a.pythonpath})", out)
        self.count(b.path, "python run")

    # ---- the CLI's commands ------------------------------------------------------
    def options_of(self, text, usage_too):
        opts = set()
        in_usage = False
        for ln in text.split("\n"):
            if ln.startswith("usage:"):
                in_usage = usage_too
            elif not ln.strip():
                in_usage = False
            if in_usage:
                opts.update(re.findall(r"--[A-Za-z0-9][\w-]*", ln))
            m = re.match(r"^ {1,8}(?:-\w,\s+)?(--[A-Za-z0-9][\w-]*)(\[?=?)(\S*)(\s+(\S+))?", ln)
            if m:
                opts.add(m.group(1))
                arg = m.group(5)
                if arg and (arg.isupper() or re.match(r"^[A-Z][A-Z0-9|._]*$|^\w+\|", arg)):
                    self.takes_value.add(m.group(1))
        return opts

    def load_help(self):
        if self.commands is not None:
            return
        rc, out = self.run(self.a.cli + ["--help"], 60)
        if rc != 0:
            raise RuntimeError(f"`edgert --help` exited {rc}:\n{out}")
        self.commands = set()
        section = None
        for ln in out.split("\n"):
            if re.match(r"^\S.*:$", ln):
                section = ln
            m = re.match(r"^  ([a-z][a-z0-9-]*)\s{2,}\S", ln)
            if m and section == "Commands:":
                self.commands.add(m.group(1))
        self.global_opts = self.options_of(out, False)
        if re.search(r"edgert --version", out):
            self.global_opts.add("--version")
        if not self.commands:
            raise RuntimeError(f"no commands found in `edgert --help`:\n{out}")

    def command_opts(self, cmd):
        if cmd not in self.help:
            rc, out = self.run(self.a.cli + [cmd, "--help"], 60)
            if rc != 0:
                raise RuntimeError(f"`edgert {cmd} --help` exited {rc}:\n{out}")
            self.help[cmd] = self.options_of(out, True)
        return self.help[cmd]

    @staticmethod
    def logical_lines(b):
        """(line number, command) of a shell block: continuations joined,
        here-documents and (in console blocks) output left out."""
        out, i, lines = [], 0, b.lines
        console = b.lang in ("console", "shell-session")
        while i < len(lines):
            first, ln = i, lines[i]
            i += 1
            if console:
                m = re.match(r"^\s*[$%]\s+(.*)$", ln)
                if not m:
                    continue
                ln = m.group(1)
            while ln.endswith("\\") and i < len(lines):
                nxt = lines[i]
                if console:
                    nxt = re.sub(r"^\s*>\s?", "", nxt)
                ln = ln[:-1] + " " + nxt
                i += 1
            for tag in re.findall(r"<<-?\s*['\"]?([A-Za-z_]\w*)['\"]?", ln):
                while i < len(lines) and lines[i].strip() != tag:
                    i += 1
                i += 1
            out.append((b.line + 1 + first, ln))
        return out

    def check_shell(self, b):
        for lineno, ln in self.logical_lines(b):
            where = f"{b.path}:{lineno}"
            try:
                lex = shlex.shlex(ln, posix=True, punctuation_chars=True)
                lex.whitespace_split = True
                lex.commenters = "#"
                toks = list(lex)
            except ValueError as e:
                if re.search(r"(^|[\s/;&|(])edgert\s", ln):
                    self.fail(where, f"cannot read this command line ({e}): {ln.strip()}")
                continue
            segs, cur = [], []
            for t in toks:
                if t and set(t) <= set("&|;()"):
                    segs.append((cur, t))
                    cur = []
                else:
                    cur.append(t)
            segs.append((cur, ""))
            alone = len([s for s, _ in segs if s]) == 1 and not any(
                t and set(t) <= set("<>&|;()") for t in toks)
            for words, _sep in segs:
                while words and (re.match(r"^[A-Za-z_]\w*=", words[0]) or
                                 words[0] in ("sudo", "env", "time", "exec", "command")):
                    words = words[1:]
                if not words or os.path.basename(words[0]) != "edgert" or \
                        words[0].endswith("/"):
                    continue
                self.check_cli(b.path, where, words, alone and not re.search(r"[$`*?]", ln))

    def check_cli(self, path, where, words, may_run):
        self.load_help()
        args, cmd, i, bad = words[1:], None, 0, []
        shown = " ".join(words)
        pre = []
        while i < len(args):  # common options may come before the command
            t = args[i]
            if not t.startswith("-"):
                break
            pre.append(t)
            name = t.split("=", 1)[0]
            if name.startswith("--") and name not in self.global_opts:
                bad.append(f"{name} is not an option of `edgert --help`")
            if name in self.takes_value and "=" not in t:
                i += 1
            i += 1
        if i < len(args):
            cmd = args[i]
            rest = args[i + 1:]
            if cmd == "help":
                if rest and rest[0] not in self.commands:
                    bad.append(f"`edgert help {rest[0]}`: no such command")
                rest = []
            elif cmd not in self.commands:
                bad.append(f"`{cmd}` is not a command of `edgert --help` "
                           f"({', '.join(sorted(self.commands))})")
                rest = []
        else:
            rest = []
            if not pre:
                bad.append("no command")
        if cmd in self.commands:
            known = self.command_opts(cmd) | self.global_opts
            for t in rest:
                if t == "--":
                    break
                if t.startswith("--") and len(t) > 2:
                    name = t.split("=", 1)[0]
                    if name not in known:
                        bad.append(f"{name} is not in `edgert {cmd} --help`")
        self.count(path, "cli checked")
        if bad:
            self.fail(where, f"`{shown}`: " + "; ".join(bad))
            return
        if not may_run or cmd not in RUNNABLE:
            return
        j = 0
        while j < len(rest):
            t = rest[j]
            name, eq, val = t.partition("=")
            if name == "--explain" and (not eq or val == "full"):
                j += 1
                continue
            if name not in RUN_OPTS or (eq and not RUN_OPTS[name]):
                return
            if RUN_OPTS[name] and not eq:
                j += 1
                if j >= len(rest):
                    return
                val = rest[j]
            if name == "--device" and not os.path.isfile(os.path.join(self.a.source, val)):
                return
            j += 1
        rc, out = self.run(self.a.cli + args, 120)
        if rc not in (0, 3):
            self.fail(where, f"`{shown}` (run from the source tree) exited {rc} "
                      "(0 or 3 required)", out)
        self.count(path, "cli run")

    # ---- YAML --------------------------------------------------------------------
    def check_yaml(self, b):
        where = f"{b.path}:{b.line}"
        text = b.text
        if re.search(r"^name:", text, re.M) and re.search(r"^abi:", text, re.M):
            kind, self.n = "manifest", self.n + 1
            d = os.path.join(self.work, f"manifest{self.n}")
            os.mkdir(d)
            f = os.path.join(d, "example.yaml")
            argv = ["list", "--manifests", d, "--json"]
        elif re.search(r"^profile_version:", text, re.M):
            kind, self.n = "device profile", self.n + 1
            f = os.path.join(self.work, f"profile{self.n}.yaml")
            argv = ["probe", "--device", f, "--json"]
        else:
            return
        with open(f, "w", encoding="utf-8") as fh:
            fh.write(text)
        rc, out = self.run(self.a.cli + argv, 120)
        errors = []
        try:
            start = out.index("{")
            doc = json.JSONDecoder().raw_decode(out[start:])[0]
            errors = [d for d in doc.get("diagnostics", []) if d.get("level") == "error"]
        except ValueError:
            errors = ["no JSON object on stdout"]
        if rc != 0 or errors:
            self.fail(where, f"```yaml {kind}: `edgert {' '.join(argv)}` exited {rc} with "
                      f"{len(errors)} error diagnostic(s)", out)
        self.count(b.path, f"yaml {kind} loaded")

    def check(self, b):
        try:
            if b.lang == "c":
                self.check_c(b)
            elif b.lang in ("python", "py", "python3"):
                self.check_python(b)
            elif b.lang in SHELL_LANGS:
                self.check_shell(b)
                self.count(b.path, "shell blocks read")
            elif b.lang in ("yaml", "yml") and os.path.basename(b.path) in YAML_CHECKED:
                self.check_yaml(b)
        except RuntimeError as e:
            self.fail(f"{b.path}:{b.line}", str(e))


def doc_files(src):
    files = [os.path.join(src, "README.md")]
    files += sorted(glob.glob(os.path.join(src, "docs", "**", "*.md"), recursive=True))
    return [f for f in files if os.path.isfile(f)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--source", required=True, help="the source tree's root")
    p.add_argument("--cli", required=True, help="the built CLI, or the emulator and the CLI "
                   "separated by '|' or spaces")
    p.add_argument("--lib", required=True, help="the built libedgert file")
    p.add_argument("--runner-lib", default="", help="the built libedgert-runner file")
    p.add_argument("--cc", default=os.environ.get("CC", "cc"))
    p.add_argument("--include", action="append", default=[],
                   help="a public header folder (repeatable)")
    p.add_argument("--python", default=os.environ.get("EDGERT_TEST_PYTHON", ""))
    p.add_argument("--pythonpath", default="", help="the build tree's python/ folder")
    p.add_argument("--cflags", default="", help="more flags for compiling and linking C blocks "
                   "(a sanitized build's -fsanitize=..., so its runtime comes first)")
    p.add_argument("--no-python", default="", metavar="WHY",
                   help="report the Python blocks skipped, saying WHY (a sanitized build: an "
                   "interpreter does not load the sanitizer's runtime)")
    p.add_argument("files", nargs="*", help="Markdown files (default: README.md, docs/**/*.md)")
    a = p.parse_args()
    a.source = os.path.abspath(a.source)
    a.pythonpath = os.path.abspath(a.pythonpath) if a.pythonpath else ""
    a.cli = [x for x in re.split(r"[|\s]+", a.cli) if x]

    skip = []
    cc0 = shlex.split(a.cc)[0] if a.cc.strip() else ""
    if not cc0 or not shutil.which(cc0):
        skip.append(f"no C compiler ({a.cc!r})")
    if not os.path.isfile(a.lib):
        skip.append(f"no built libedgert ({a.lib})")
    if not a.cli or not shutil.which(a.cli[-1]):
        skip.append(f"no built CLI ({' '.join(a.cli)})")
    if skip:
        for s in skip:
            print(f"SKIPPED: {NAME}: all: {s}")
        return SKIP

    files = [os.path.abspath(f) for f in a.files] or doc_files(a.source)
    with tempfile.TemporaryDirectory(prefix="edgert-docs-") as work:
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        home = os.path.join(work, "home")
        for k, sub in (("HOME", "home"), ("XDG_CACHE_HOME", "cache"),
                       ("XDG_DATA_HOME", "data"), ("XDG_CONFIG_HOME", "config")):
            os.makedirs(os.path.join(work, sub))
            env[k] = os.path.join(work, sub)
        env.setdefault("EDGERT_CONTENTION", "ignore")
        env["TMPDIR"] = work
        assert os.path.isdir(home)
        c = Checker(a, env, work)
        for f in files:
            rel = os.path.relpath(f, a.source)
            c.counts.setdefault(rel, {})
            for b in blocks_of(f, rel):
                c.check(b)

    print("\nSummary (blocks compiled/run; CLI command lines checked/run):")
    for rel, counts in c.counts.items():
        shown = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing to check"
        print(f"  {rel}: {shown}")
    for s in c.skips:
        print(s)
    if c.failures:
        print(f"\n{len(c.failures)} failure(s):")
        for f in c.failures:
            print("  " + f.split("\n", 1)[0])
        return 1
    print("all examples pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
