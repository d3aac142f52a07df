#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compile, run and check every code block, code span and flag table of
README.md, CONTRIBUTING.md, python/README.md and docs/**/*.md.

So that the documentation cannot rot: an API change that breaks an example,
or a tool option that is renamed, fails this test (ctest docs_code_blocks).

Usage: check_code_blocks.py SOURCE_DIR BUILD_DIR [--keep DIR] [-v]

The scheme (deterministic: nothing here depends on timing, except that a
`run` program gets a generous gsrun --timeout):

C blocks, fenced ```c. The fence's info string says what the block is:

  ```c            a complete program (it defines main). Compiled and linked
                  against the build's headers and libgradsync.so:
                  gcc -std=c11 -Wall -Werror -I<src>/include -I<build>/include
                  (plus $GS_DOC_CFLAGS: the build's sanitizer flags).
  ```c run        a complete program that is also run, under
  ```c run=N      <build>/tools/gsrun -n N --timeout 120 (N = 2 by default,
                  GS_TIMEOUT_MS=30000); it must exit 0.
  ```c fragment   part of a program. Its #include lines are hoisted to file
                  scope; the rest is compiled as the body of a function
                  `int fragment(void)` after the public headers (gradsync.h,
                  compress.h, bucket.h, ps.h, and stdio/stdlib/string), with
                  gcc -std=c11 -Wall -Werror -Wno-unused-variable
                  -Wno-unused-but-set-variable -c (not linked). The names a
                  fragment uses but does not declare (`comm`, `grad`, `n`,
                  the user's own functions such as `backward()`) are declared
                  `extern` at file scope from its context, which is either an
                  HTML comment on the line right before the fence, invisible
                  when rendered,
                      <!-- context: float *grad; size_t n; void backward(void); -->
                  or, for pages that predate this test, an entry of
                  FILE_CONTEXT below; DEFAULT_CONTEXT applies to every page.
                  A declaration inside the fragment shadows the extern one;
                  a name the page or block context declares replaces the
                  default declaration of that name.

  A ```c block without `fragment` that defines no main() is treated as a
  fragment too (README.md and the older pages were written before this
  scheme), except in docs/guide/, whose blocks must say which they are:
  there an unmarked block without main() is an error. A block that includes
  gradsync/mpi.h or gradsync/cuda.h is skipped (reported, not failed) when
  the build has no MPI or the CUDA headers are not installed.

Shell blocks, fenced ```sh, ```bash, ```console or ```shell, and plain ```
blocks: every command line (after joining backslash continuations; in
plain blocks and console blocks only lines starting with "$ ", or whose
first word is a gradsync tool) is split at | && || ; and each command that
runs gsrun, gs-bench or gs_info (any path, after VAR=value assignments) has
its options checked against the tool's own --help text (gs-bench's
`bucket` and `ps` subcommands against theirs): every --long option must
appear in it, and every short option -x as a whole word. Placeholders in
[brackets], <angles> and option values are not options; an elision
("..." or "…" as a word) ends the check of that command, since what
follows belongs to an elided program. gsrun's
program, and the program's arguments, are checked in turn when the program
is a gradsync tool. Nothing is run (but see "Sample output" below). A tool
this build does not have
(gs-bench with GS_BUILD_BENCH=OFF) is reported and its lines skipped.

Every command (in a shell block or a code span of prose) is also checked
for what it names besides a tool's options: a GS_* variable it sets
(VAR=value, export, mpirun -x) must be a row of src/core/env_table.h or a
name the Makefile, scripts or tests read; `make TARGET` a target of the
Makefile; `-DGS_*` an option() or CACHE variable of the CMake files. An
option's placeholder must be the one --help gives it (`-o FILE` fails when
--help says `-o, --op NAME`).

README.md and python/README.md run as written from the repository root:
a tool is named by its path in the build tree (build/tools/gsrun, never a
bare gsrun, which is not on PATH there); every build/ path and every .py,
.c, .sh or .so file a command names exists (build/ is the build directory
given), unless the page says to save or write it (`save it as demo.py`);
a ```python block's imports other than gradsync and the standard library
are named in the page's prose (so the page says what the example needs).
Every ```python block must parse (a signature written as a call, with
`*, key=...`, is accepted).

Names: every GS_* name in a code span or a non-C block must exist in the
tree (a variable of the env table, a macro or enum value of the headers or
sources, a CMake option), so a renamed or removed name cannot linger in
the documentation.

Prose: every code span that starts with an option (`--out FILE`, `-b`),
in paragraphs, list items and table cells, is checked against the --help
of the program it belongs to: the program named before it in its sentence
(gsrun, gs-bench, gs-bench bucket/ps, gs_info, or another program such as
mpirun, cmake, compare.sh, whose options are not checked), else the one
the page named last before the sentence (a possessive "gsrun's" counts in
its own sentence only), else one named after it in the sentence. A table
column whose header names a program holds that program's options.
Compiler-style flags (`-O3`, `-Werror`, `-ffp-contract=off`) and mpirun's
`-x VAR` belong to no tool. A code span that is a command is checked as
a command.

Flag tables: a table whose first column holds options of a tool and names
at least half of the options its --help lists (the reference table) must
name all of them, so an option added to the tool cannot go undocumented.

Sample output: a ```sh block that is one `build/tools/gsrun ... gs-bench`
command, directly followed by a plain block of `[0]` lines, is run (on
loopback, under gsrun --timeout 120) and what does not depend on timing is
compared: the header lines, and in each sample row the size, type, op,
root, whether #wrong is a count or N/A, and the algorithm asked for.

Links: every relative markdown link [text](path) of those pages must name a
file or folder that exists in the repository.

Status codes: every row of GS_STATUS_MAP (include/gradsync/status.h) must
have a row `| \`GS_...\` |` in docs/guide/troubleshooting.md, so a new code
cannot ship without its explanation.

Exit status: 0 when every block passed (skips allowed), 1 otherwise.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

# Names the documents' fragments may use without declaring them.
DEFAULT_CONTEXT = """
gs_comm_t comm; int rank; int size; size_t n; size_t count;
float *grad; float *buf; float *sendbuf; float *recvbuf;
gs_request_t req; gs_status_t status;
"""

# Pages written before this test, which carry no <!-- context: --> comments.
FILE_CONTEXT = {
    "README.md": "",
    "docs/async.md": """
size_t nparams; float **grad; size_t *count; size_t *id;
void forward(void); void backward(void); void optimizer_step(void);
const float *rank0_init; float *w, *g;
void compute_gradient(const float *w_, float *g_);
""",
    "docs/compression.md": "void *scratch, *payload; float *sum;",
    "docs/stats.md": "",
}

TOOLS = ("gsrun", "gs-bench", "gs_info")
GSRUN_VALUE_OPTS = ("-n", "--nranks", "--nproc-per-node", "--nnodes", "--node-rank", "--port",
                    "--master-port", "--addr", "--master-addr", "--timeout")
SHELL_LANGS = ("sh", "bash", "shell", "console", "")
# Pages whose commands run as written from the repository root.
ROOT_PAGES = ("README.md", "python/README.md")
C_FENCE = re.compile(r"^(\s*)```\s*c(\s+.*)?$")
FENCE = re.compile(r"^(\s*)```\s*([A-Za-z0-9_+-]*)(.*)$")
CONTEXT_COMMENT = re.compile(r"^\s*<!--\s*context:(.*?)-->\s*$")


# ------------------------------------------------------------------ help texts
HELP_OPT = re.compile(r"^(--?[A-Za-z][\w-]*)(\[=([^\]]*)\]|=(\S+))?$")
METAVAR = re.compile(r"^[A-Z][A-Z0-9_]*$")
ALTERNATIVES = re.compile(r"^[0-9A-Za-z]+(\|[0-9A-Za-z]+)+$")

# Programs named in prose that are not gradsync's tools: a flag next to one
# of them is theirs, not a gradsync tool's.
OTHER_PROGRAMS = ("mpirun", "mpiexec", "srun", "cmake", "make", "torchrun", "nccl-tests",
                  "ctest", "pytest", "pip", "pip3", "python", "python3", "nvcc", "gcc", "clang",
                  "cc", "valgrind", "docker", "ssh", "perf", "mpi-bench", "gloo-bench",
                  "reduce-bench", "plot-bench", "compare.sh", "table.py", "bench-plots.sh",
                  "clang-tidy", "clang-format", "doxygen", "pkg-config", "ncu", "nsys", "git",
                  "apt", "apt-get", "ip", "tc", "sudo")
TOOL_IN_TEXT = re.compile(r"(?<![\w/.-])(gsrun|gs-bench|gs_info)(?:'s)?(?:\s+(bucket|ps)\b)?"
                          r"(?![\w-])")
OTHER_IN_TEXT = re.compile(r"(?<![\w/.-])(%s)(?:'s)?(?![\w-])" % "|".join(
    re.escape(p) for p in OTHER_PROGRAMS if p not in ("cc", "ip", "tc", "git", "apt", "pip",
                                                      "python", "perf", "make", "sudo")))
# `-O3 -g`, `-Werror`, `-ffp-contract=off`, `-DNAME`, `-std=c11`: a compiler's
# flags (gradsync's tools have no upper-case or multi-letter short options).
COMPILER_FLAG = re.compile(r"^-([A-Z]\S*|[fm][a-z][\w=,-]+|g\d?|std=\S+)(\s|$)")
MPIRUN_EXPORT = re.compile(r"^-x\s+[A-Za-z_]\w*(=|$)")
SENTENCE_END = re.compile(r"[.;!?](?=\s|$)|:\s")


def parse_help(text):
    """A tool's --help as {option: set of metavars} and the options that
    start a line of its option list (the ones a reference table must list)."""
    opts, listed = {}, set()
    for line in text.split("\n"):
        words = []
        for w in line.replace(",", " ").split():
            w = w.strip("()")
            w = w[1:] if w.startswith("[") else w
            words.append(w[:-1] if w.endswith("]") and "[=" not in w else w)
        leading = line[:1].isspace() and line.lstrip().startswith("-")
        group = []
        for w in words:
            m = HELP_OPT.match(w)
            if m:
                opt = m.group(1)
                opts.setdefault(opt, set())
                if m.group(3) or m.group(4):
                    opts[opt].add(m.group(3) or m.group(4))
                group.append(opt)
                if leading:
                    listed.add(opt)
                continue
            if w == "|":
                continue
            if group and (METAVAR.match(w) or ALTERNATIVES.match(w)):
                for opt in group:
                    opts[opt].add(w)
            else:
                leading = False
            group = []
    return opts, listed


def program_of(word):
    """('tool', name) for a gradsync tool, ('other', name) for another
    program, None for a word that names no program."""
    if not word:
        return None
    base = os.path.basename(word)
    if base in TOOLS:
        return ("tool", base, None)
    if base in OTHER_PROGRAMS or "/" in word or re.search(r"\.(sh|py)$", word):
        if re.match(r"^[\w./$+-]+$", word):
            return ("other", base, None)
    return None


def innermost_program(words):
    """What a command runs: gsrun's program when that is a gradsync tool
    (with gs-bench's subcommand), else the command itself."""
    prog = program_of(words[0]) if words else None
    if prog and prog[1] == "gsrun":
        k = 1
        while k < len(words) and words[k].startswith("-") and words[k] != "--":
            k += 2 if words[k] in GSRUN_VALUE_OPTS else 1
        k += 1 if (k < len(words) and words[k] == "--") else 0
        if k < len(words) and words[k] != "ELIDED":
            words = words[k:]
            prog = program_of(words[0]) or ("other", os.path.basename(words[0]), None)
    if prog and prog[1] == "gs-bench" and len(words) > 1 and words[1] in ("bucket", "ps"):
        prog = (prog[0], prog[1], words[1])
    return prog


def unescape_cell(text):
    return text.replace("\\|", "|")


def split_table_row(line):
    cells, cur, i, code = [], "", 0, False
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body) and body[i + 1] == "|":
            cur += "\\|"
            i += 2
            continue
        if c == "`":
            code = not code
        if c == "|" and not code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    cells.append(cur.strip())
    return cells


def prose_units(lines):
    """The prose of a page outside fenced blocks, as units: ('text', line
    number, text) for a paragraph or heading, ('table', line number, header
    cells, [(line number, cells)]) for a table, ('block', line number, Block
    index) where a fenced block stands."""
    units, i, para, para_line, nblock = [], 0, [], 0, 0

    def flush():
        if para:
            units.append(("text", para_line, " ".join(para)))
        del para[:]

    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            flush()
            units.append(("block", i + 1, nblock))
            nblock += 1
            i += 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                i += 1
            i += 1
            continue
        s = line.strip()
        if s.startswith("|") and i + 1 < len(lines) and \
                re.match(r"^\s*\|?\s*:?-{3,}", lines[i + 1]):
            flush()
            header, start = split_table_row(s), i + 1
            rows, i = [], i + 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append((i + 1, split_table_row(lines[i])))
                i += 1
            units.append(("table", start, header, rows))
            continue
        if not s or s.startswith("#") or s.startswith("<!--"):
            flush()
            if s.startswith("#"):
                units.append(("text", i + 1, s))
            i += 1
            continue
        if not para:
            para_line = i + 1
        if re.match(r"^\s*([-*]|\d+\.)\s", line):
            flush()
            para_line = i + 1
        para.append(s)
        i += 1
    flush()
    return units


def text_events(text):
    """Program mentions, code spans and sentence ends of one piece of prose,
    in order: (pos, 'span', text), (pos, 'prog', (kind, name, subcmd)),
    (pos, 'end', None)."""
    events = []
    for m in re.finditer(r"`([^`]+)`", text):
        events.append((m.start(), "span", unescape_cell(m.group(1))))
    spans = [(m.start(), m.end()) for m in re.finditer(r"`[^`]+`", text)]

    def in_span(pos):
        return any(a <= pos < b for a, b in spans)

    for rx, kind in ((TOOL_IN_TEXT, "tool"), (OTHER_IN_TEXT, "other")):
        for m in rx.finditer(text):
            if not in_span(m.start()):
                # "gsrun's [rank] prefix" names a thing of gsrun, not the program
                # the text is about: it counts in its own sentence only.
                possessive = "'s" in m.group(0)
                events.append((m.start(), "poss" if possessive else "prog",
                               (kind, m.group(1), m.group(2) if kind == "tool" else None)))
    for m in SENTENCE_END.finditer(text):
        if not in_span(m.start()):
            events.append((m.start(), "end", None))
    events.sort(key=lambda e: (e[0], e[1] != "end"))
    return events


class Block:
    def __init__(self, path, line, lang, info, text, context):
        self.path, self.line, self.lang, self.info = path, line, lang, info
        self.text, self.context = text, context

    def where(self):
        return "%s:%d" % (self.path, self.line)


def find_markdown(src):
    files = ["README.md", "CONTRIBUTING.md", "python/README.md"]
    for root, dirs, names in os.walk(os.path.join(src, "docs")):
        dirs.sort()
        for name in sorted(names):
            if name.endswith(".md"):
                files.append(os.path.relpath(os.path.join(root, name), src))
    return [f for f in files if os.path.exists(os.path.join(src, f))]


def extract_blocks(src, rel):
    """Every fenced block of one page: (lang, info words, text, context)."""
    lines = open(os.path.join(src, rel), encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, rest = m.group(1), m.group(2).lower(), m.group(3).split()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line)
            i += 1
        ctx = None
        if start >= 2:
            cm = CONTEXT_COMMENT.match(lines[start - 2])
            if cm:
                ctx = cm.group(1).strip()
        blocks.append(Block(rel, start, lang, rest, "\n".join(body) + "\n", ctx))
        i += 1
    return blocks


def run(cmd, timeout=120, env=None, cwd=None):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, env=env, cwd=cwd)
        return p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode("utf-8", "replace") if e.stdout else ""
        return 124, out + "\n(timed out after %d s)" % timeout


class Checker:
    def __init__(self, src, build, keep=None, verbose=False):
        self.src, self.build, self.verbose = src, build, verbose
        self.work = keep or tempfile.mkdtemp(prefix="gs-doc-blocks-")
        os.makedirs(self.work, exist_ok=True)
        self.cc = os.environ.get("CC", "gcc")
        # The build's sanitizer flags (tests/docs/CMakeLists.txt passes them), so that
        # a program links and runs against an instrumented libgradsync.
        self.cflags = shlex.split(os.environ.get("GS_DOC_CFLAGS", ""))
        self.incs = ["-I" + os.path.join(src, "include"), "-I" + os.path.join(build, "include")]
        self.fail, self.ok, self.skip = [], 0, []
        self.help_cache = {}
        self.missing_tools = set()
        self.n = 0
        self._env = self._cmake = self._make = self._tree = None
        self.nspans = 0  # option spans of prose and tables checked
        self.last_program = {}  # (page, line) of a shell block -> the program it names last
        self.mpi_flags, self.mpi_libs = [], []
        self.has_mpi = self._probe_header("mpi.h")
        self.has_cuda = self._probe_header("cuda_runtime_api.h")

    def _probe_header(self, header):
        extra = []
        if header == "mpi.h":
            rc, out = run(["mpicc", "--showme:compile"], timeout=30) if self._which("mpicc") \
                else (1, "")
            if rc == 0:
                extra = shlex.split(out)
                self.mpi_flags = extra
                rc, out = run(["mpicc", "--showme:link"], timeout=30)
                self.mpi_libs = shlex.split(out) if rc == 0 else []
        path = os.path.join(self.work, "probe.c")
        with open(path, "w") as f:
            f.write("#include <%s>\nint probe_unused;\n" % header)
        rc, _ = run([self.cc, "-fsyntax-only"] + extra + [path], timeout=60)
        return rc == 0

    @staticmethod
    def _which(prog):
        return any(os.access(os.path.join(d, prog), os.X_OK)
                   for d in os.environ.get("PATH", "").split(os.pathsep))

    def _file(self, suffix):
        self.n += 1
        return os.path.join(self.work, "block%03d%s" % (self.n, suffix))

    def report(self, block, ok, msg=""):
        if ok:
            self.ok += 1
            if self.verbose:
                print("ok   %s %s" % (block.where(), msg))
        else:
            self.fail.append(block.where())
            print("FAIL %s %s" % (block.where(), msg))

    # ------------------------------------------------------------------ C
    def check_c(self, b):
        info = b.info
        has_main = re.search(r"\bint\s+main\s*\(", b.text) is not None
        fragment = ("fragment" in info) or not has_main
        in_guide = b.path.startswith("docs/guide/")
        if in_guide and not has_main and "fragment" not in info:
            self.report(b, False, "a C block without main() must be fenced ```c fragment")
            return
        if "fragment" in info and has_main:
            self.report(b, False, "```c fragment defines main(): fence it ```c (a program)")
            return
        needs = re.findall(r"#\s*include\s*<gradsync/(mpi|cuda)\.h>", b.text)
        extra = []
        if "mpi" in needs:
            if not self.has_mpi:
                self.skip.append(b.where() + " (needs MPI)")
                return
            extra += self.mpi_flags
        if "cuda" in needs and not self.has_cuda:
            self.skip.append(b.where() + " (needs the CUDA headers)")
            return
        if fragment:
            self.check_fragment(b, extra)
        else:
            self.check_program(b, extra)

    def check_fragment(self, b, extra):
        hoisted, body = [], []
        for line in b.text.split("\n"):
            (hoisted if re.match(r"^\s*#\s*include\b", line) else body).append(line)
        decls = []
        for ctx in (DEFAULT_CONTEXT, FILE_CONTEXT.get(b.path, ""), b.context or ""):
            for decl in ctx.split(";"):
                decl = " ".join(decl.split())
                if not decl:
                    continue
                if "(" in decl:
                    names = re.findall(r"([A-Za-z_]\w*)\s*\(", decl)[:1]
                else:
                    names = re.findall(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*(?:,|$)", decl)
                decls = [(n_, d_) for (n_, d_) in decls if not set(n_) & set(names)]
                decls.append((names, decl))
        externs = ["extern %s;" % d for (_, d) in decls]
        code = ("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
                "#include <gradsync/gradsync.h>\n#include <gradsync/compress.h>\n"
                "#include <gradsync/bucket.h>\n#include <gradsync/ps.h>\n"
                + "\n".join(hoisted) + "\n" + "\n".join(externs) + "\n"
                "int fragment(void);\nint fragment(void)\n{\n{\n#line %d \"%s\"\n%s\n}\n"
                "return 0;\n}\n" % (b.line + 1, b.path, "\n".join(body)))
        path = self._file(".c")
        with open(path, "w") as f:
            f.write(code)
        cmd = [self.cc] + self.cflags + ["-std=c11", "-Wall", "-Werror", "-Wno-unused-variable",
               "-Wno-unused-but-set-variable", "-c", "-o", os.devnull] + self.incs + extra + [path]
        rc, out = run(cmd)
        self.report(b, rc == 0, "fragment compiled" if rc == 0 else
                    "fragment does not compile (%s):\n%s" % (path, out))

    def check_program(self, b, extra):
        path = self._file(".c")
        exe = path[:-2]
        with open(path, "w") as f:
            f.write("#line %d \"%s\"\n%s" % (b.line + 1, b.path, b.text))
        libs = ["-L" + self.build, "-Wl,-rpath," + self.build, "-lgradsync", "-lm"]
        if extra:
            libs += self.mpi_libs
        cmd = [self.cc] + self.cflags + ["-std=c11", "-Wall", "-Werror", "-o", exe] + \
            self.incs + extra + \
            [path] + libs
        rc, out = run(cmd)
        if rc != 0:
            self.report(b, False, "program does not compile (%s):\n%s" % (path, out))
            return
        runs = [w for w in b.info if w == "run" or w.startswith("run=")]
        if not runs:
            self.report(b, True, "program compiled and linked")
            return
        nranks = int(runs[0].split("=", 1)[1]) if "=" in runs[0] else 2
        env = dict(os.environ)
        env.setdefault("GS_TIMEOUT_MS", "30000")
        gsrun = os.path.join(self.build, "tools", "gsrun")
        rc, out = run([gsrun, "-n", str(nranks), "--timeout", "120", exe], timeout=180,
                      env=env, cwd=self.work)
        self.report(b, rc == 0, "program ran on %d ranks" % nranks if rc == 0 else
                    "program failed on %d ranks (exit %d):\n%s" % (nranks, rc, out))

    # -------------------------------------------------------------- shell
    def tool_path(self, tool):
        sub = {"gsrun": "tools", "gs_info": "tools", "gs-bench": "bench"}[tool]
        return os.path.join(self.build, sub, tool)

    def help_text(self, tool, subcmd=None):
        key = (tool, subcmd)
        if key not in self.help_cache:
            args = [self.tool_path(tool)] + ([subcmd] if subcmd else []) + ["--help"]
            rc, out = run(args, timeout=30)
            self.help_cache[key] = out if rc == 0 else None
        return self.help_cache[key]

    @staticmethod
    def check_metavar(tool, opts, arg, nxt, problems):
        """`-o FILE` where --help says `-o, --op NAME`: the placeholder must be
        the one --help gives the option (when it gives one)."""
        m = re.match(r"^(--?[A-Za-z][\w-]*)(?:=(.*))?$", arg)
        if not m or (arg.startswith("-") and not arg.startswith("--") and len(arg) > 2):
            return
        opt, value = m.group(1), m.group(2) if m.group(2) is not None else nxt
        if value is None or not METAVAR.match(value) or value in ("X", "ELIDED"):
            return
        names = {v for v in opts.get(opt, ()) if METAVAR.match(v)}
        if names and value not in names:
            problems.append("%s %s takes %s (its --help), not %s" %
                            (tool, opt, "|".join(sorted(names)), value))

    def check_tool(self, b, words, problems):
        """words[0] is a tool; check its options; recurse into gsrun's program."""
        tool = os.path.basename(words[0])
        args = words[1:]
        if not os.access(self.tool_path(tool), os.X_OK):
            self.missing_tools.add(tool)  # e.g. gs-bench in a GS_BUILD_BENCH=OFF build
            return False
        subcmd = None
        if tool == "gs-bench" and args and args[0] in ("bucket", "ps"):
            subcmd = args[0]
        helps = [self.help_text(tool)]
        if subcmd:
            helps.append(self.help_text(tool, subcmd))
        if any(h is None for h in helps):
            problems.append("%s --help failed (is %s built?)" % (tool, self.tool_path(tool)))
            return True
        text = "\n".join(helps)
        opts, _ = parse_help(text)
        i = 0
        while i < len(args):
            a = args[i]
            if a == "ELIDED":
                return True
            self.check_metavar(tool, opts, a, args[i + 1] if i + 1 < len(args) else None,
                               problems)
            if a == "--":
                i += 1
                break
            if tool == "gsrun" and not a.startswith("-"):
                break  # the program
            if a.startswith("--") and len(a) > 2:
                opt = a.split("=", 1)[0]
                if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(opt), text):
                    problems.append("%s has no option %s" % (tool, opt))
            elif re.match(r"^-[A-Za-z]", a):
                opt = a[:2]
                if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(opt), text):
                    problems.append("%s has no option %s" % (tool, opt))
                if tool == "gsrun" and a[:2] == "-n" and len(a) == 2:
                    i += 1  # its value
            elif tool == "gsrun":
                break
            if tool == "gsrun" and a in GSRUN_VALUE_OPTS[1:]:
                i += 1  # its value
            i += 1
        if tool == "gsrun" and i < len(args):
            prog = os.path.basename(args[i])
            if prog in TOOLS:
                self.check_tool(b, args[i:], problems)
        return True

    def command_words(self, cmd):
        cmd = re.sub(r"\[[^\]]*\]", " ", cmd)  # [optional placeholders]
        cmd = re.sub(r"<[^>]*>", "X", cmd)
        cmd = re.sub(r"(^|\s)(\.\.\.|…)(?=\s|$)", " ELIDED ", cmd)
        try:
            words = shlex.split(cmd, comments=True)
        except ValueError:
            words = cmd.split()
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words.pop(0)
        for prefix in ("sudo", "env", "time", "exec", "nohup"):
            if words and words[0] == prefix:
                words.pop(0)
        return words

    def check_shell(self, b):
        strict = b.lang in ("sh", "bash", "shell")
        text = re.sub(r"\\\n\s*", " ", b.text)
        problems, seen, last = [], 0, None
        for line in text.split("\n"):
            raw = line.strip()
            if raw.startswith("$ "):
                raw = raw[2:]
            elif not strict:
                words = self.command_words(raw) if raw else []
                if not words or os.path.basename(words[0]) not in TOOLS:
                    continue
            if not raw or raw.startswith("#"):
                continue
            for cmd in re.split(r"\|\||&&|[|;]", raw):
                before = len(problems)
                prog = self.check_command(b, cmd, problems)
                if prog:
                    last = prog
                    seen += 1
                elif len(problems) > before:
                    seen += 1
        if last:
            self.last_program[(b.path, b.line)] = last
        if seen:
            self.report(b, not problems, "%d command(s) checked" % seen if not problems
                        else "; ".join(problems))

    def check_status_rows(self):
        status_h = open(os.path.join(self.src, "include/gradsync/status.h")).read()
        codes = re.findall(r"^\s*X\((GS_[A-Z0-9_]+),", status_h, re.M)
        page = "docs/guide/troubleshooting.md"
        path = os.path.join(self.src, page)
        text = open(path).read() if os.path.exists(path) else ""
        missing = [c for c in codes if ("| `%s` |" % c) not in text]
        block = Block(page, 1, "", [], "", None)
        self.report(block, bool(codes) and not missing,
                    "%d status codes, each with a row" % len(codes) if not missing else
                    "no row for %s (every code of GS_STATUS_MAP needs one)" % ", ".join(missing))

    def check_links(self, rel):
        text = open(os.path.join(self.src, rel), encoding="utf-8").read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # links in code are not links
        bad = []
        for m in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            if not os.path.exists(os.path.normpath(os.path.join(self.src, os.path.dirname(rel),
                                                                target))):
                bad.append(target)
        if bad:
            self.report(Block(rel, 1, "", [], "", None), False,
                        "links to missing files: %s" % ", ".join(bad))

    # ------------------------------------------------- names the build knows
    def env_names(self):
        """GS_* variables that exist: the env table's rows, and those the
        Makefile, scripts and tests read."""
        if self._env is None:
            names = set(re.findall(r'X\("(GS_[A-Z0-9_]+)"',
                                   open(os.path.join(self.src, "src/core/env_table.h")).read()))
            for root in ("Makefile", "scripts", "tools", "bench", "tests", "python", ".ci"):
                path = os.path.join(self.src, root)
                paths = [path] if os.path.isfile(path) else \
                    [os.path.join(r, n) for r, _, ns in os.walk(path) for n in ns
                     if re.search(r"(\.sh|\.py|\.txt|\.cmake|Makefile|run|plot-bench)$", n)]
                for f in paths:
                    try:
                        names |= set(re.findall(r"\bGS_[A-Z0-9_]+\b", open(f, errors="replace")
                                                .read()))
                    except OSError:
                        pass
            self._env = names
        return self._env

    def cmake_names(self):
        """The cache variables the build defines (option() and CACHE sets)."""
        if self._cmake is None:
            names = set()
            for r, _, ns in os.walk(self.src):
                if "/." in r or r.startswith(os.path.join(self.src, "build")):
                    continue
                for n in ns:
                    if n == "CMakeLists.txt" or n.endswith(".cmake"):
                        text = open(os.path.join(r, n), errors="replace").read()
                        names |= set(re.findall(r"\b\w*option\(\s*(\w+)", text))
                        names |= set(re.findall(r"\bset\(\s*(\w+)[^)]*\bCACHE\b", text))
            self._cmake = names
        return self._cmake

    def tree_names(self):
        """Every GS_* name of the tree: the public headers (also the generated
        version.h), the sources, kernels, tests, tools, the CMake files, and
        the variables env_names() knows."""
        if self._tree is None:
            names = set(self.env_names()) | set(self.cmake_names())
            roots = [os.path.join(self.src, d) for d in ("include", "src", "kernels", "tests",
                                                         "tools", "bench", "cmake", "python")]
            roots.append(os.path.join(self.build, "include"))
            files = [os.path.join(self.src, "CMakeLists.txt")]
            for root in roots:
                for r, _, ns in os.walk(root):
                    files += [os.path.join(r, n) for n in ns
                              if re.search(r"\.(h|c|cu|cuh|txt|cmake|in|sh|py)$", n)]
            for f in files:
                try:
                    names |= set(re.findall(r"\bGS_[A-Z0-9_]+\b", open(f, errors="replace").read()))
                except OSError:
                    pass
            self._tree = names
        return self._tree

    def check_names(self, rel):
        """Every GS_* name in a code span or a non-C block of the page names
        something that exists: a variable, a macro, an enum value, a CMake
        option (a C block is compiled instead)."""
        text = self.page_text(rel)
        spans = []
        for m in re.finditer(r"```([^\n]*)\n(.*?)```", text, flags=re.S):
            if not re.match(r"^\s*c\b", m.group(1)):
                spans.append((text.count("\n", 0, m.start()) + 1, m.group(2)))
        prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        for m in re.finditer(r"`([^`]+)`", prose):
            spans.append((prose.count("\n", 0, m.start()) + 1, m.group(1)))
        bad = {}
        for line, span in spans:
            for name in re.findall(r"(?<![\w$])(GS_[A-Z0-9_]*[A-Z0-9])\b", span):
                if name not in self.tree_names():
                    bad.setdefault(name, line)
        for name, line in sorted(bad.items(), key=lambda kv: kv[1]):
            self.report(Block(rel, line, "", [], "", None), False,
                        "%s names nothing in the tree (no variable, macro, enum value or CMake "
                        "option has that name)" % name)

    def make_targets(self):
        if self._make is None:
            text = open(os.path.join(self.src, "Makefile")).read()
            self._make = set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.M))
        return self._make

    def help_opts(self, tool, subcmd=None):
        texts = [self.help_text(tool)] + ([self.help_text(tool, subcmd)] if subcmd else [])
        if any(t is None for t in texts):
            return None, None
        return parse_help("\n".join(texts))

    # ------------------------------------------------ commands of any kind
    def check_env_assignments(self, cmd, problems):
        """GS_ variables a command sets (VAR=, export VAR=, env VAR=, mpirun -x VAR)."""
        for name in re.findall(r"(?:^|[\s(])(?:export\s+|-x\s+)?(GS_[A-Z0-9_]+)=", cmd) + \
                re.findall(r"-x\s+(GS_[A-Z0-9_]+)\b", cmd):
            if name not in self.env_names():
                problems.append("%s is not a gradsync variable (src/core/env_table.h)" % name)

    def check_make(self, words, problems):
        if "-C" in words or "-f" in words:
            return
        for w in words[1:]:
            if w.startswith("-") or "=" in w or w == "ELIDED" or w == "X":
                continue
            if w not in self.make_targets():
                problems.append("the Makefile has no target %s" % w)

    def check_cmake_defs(self, text, problems):
        for name in re.findall(r"(?<![\w-])-D(GS_[A-Z0-9_]+)", text):
            if name not in self.cmake_names():
                problems.append("-D%s is not a CMake option of gradsync" % name)

    def check_root_words(self, page, words, problems):
        """README commands run from the repository root: a tool by its path in
        the build tree, every file they name present."""
        if page not in ROOT_PAGES or not words:
            return
        if words[0] in TOOLS:
            problems.append("%s is not on PATH in the repository root: write build/%s" %
                            (words[0], os.path.relpath(self.tool_path(words[0]), self.build)))
        for w in words:
            w = re.sub(r"^\$PWD/|^\$\(pwd\)/|^\./", "", w.split("=", 1)[-1])
            if w.startswith("-") or w.startswith("/") or "$" in w or "*" in w:
                continue
            if not (w.startswith("build/") or re.search(r"\.(py|c|sh|so)$", w)):
                continue
            if w.startswith("build/"):
                path = os.path.join(self.build, w[len("build/"):])
            else:
                path = os.path.join(self.src, w)
            if os.path.exists(path):
                continue
            tool = os.path.basename(w)
            if w.startswith("build/") and tool in TOOLS and \
                    os.path.normpath(path) == os.path.normpath(self.tool_path(tool)):
                # A tool this build leaves out (a sanitizer build has no gs-bench): the
                # command is right for the default build, which make test checks.
                self.skip.append("%s: %s (not built in %s)" % (page, w, self.build))
                continue
            text = self.page_text(page)
            if not w.startswith("build/") and re.search(
                    r"(?i)\b(save|saved|write|written|put)\b[^.]*`%s`" % re.escape(w), text):
                continue  # the page says to create it
            problems.append("%s does not exist (run from the repository root)" % w)

    def page_text(self, page):
        return open(os.path.join(self.src, page), encoding="utf-8").read()

    def check_command(self, b, cmd, problems):
        """One command (no | && ; left): tool options, variables, make
        targets, CMake options, README paths. Returns what it names."""
        self.check_env_assignments(cmd, problems)
        self.check_cmake_defs(cmd, problems)
        words = self.command_words(cmd)
        if not words:
            return None
        prog = innermost_program(words)
        self.check_root_words(b.path, words, problems)
        if prog and prog[0] == "tool":
            self.check_tool(b, words, problems)
        elif words[0] == "make":
            self.check_make(words, problems)
            prog = ("other", "make")
        elif words[0] in ("cmake", "mpirun", "srun", "sudo") and prog is None:
            prog = ("other", words[0])
        return prog

    # -------------------------------------------------------------- prose
    def check_flag_span(self, b, prog, span, problems):
        """A code span of options (`-o FILE`, `--algo LIST --rounds N`) of
        the program the prose attributes it to."""
        if not prog or prog[0] != "tool":
            return
        words = span.split()
        if any(w.startswith("-D") for w in words):
            return
        self.nspans += 1
        self.check_tool(b, [prog[1]] + ([prog[2]] if prog[2] else []) + words, problems)

    def check_text(self, b, text, current, problems, fixed=None):
        """Code spans of one piece of prose. A span of options belongs to the
        program named in its sentence (the nearest one before it, else the
        first after it), else to the one named last before the sentence
        (`current`); `fixed` overrides (a table column named after a tool).
        Returns the program named last."""
        events = text_events(text)
        sentences, cur = [], []
        for e in events:
            if e[1] == "end":
                sentences.append(cur)
                cur = []
            else:
                cur.append(e)
        sentences.append(cur)
        for sent in sentences:
            progs, poss = [], []
            for pos, kind, val in sent:
                if kind == "prog":
                    progs.append((pos, val))
                elif kind == "poss":
                    poss.append((pos, val))
                elif kind == "span":
                    sp = self.span_program(b, val, problems)
                    if sp:
                        progs.append((pos, sp))
            for pos, kind, val in sent:
                if kind != "span" or not re.match(r"^--?[A-Za-z]", val):
                    continue
                self.check_cmake_defs(val, problems)
                if COMPILER_FLAG.match(val) or MPIRUN_EXPORT.match(val):
                    continue  # a compiler's or mpirun's, whatever the sentence names
                if fixed:
                    owner = fixed
                else:
                    named = sorted(progs + poss)
                    before = [p for (q, p) in named if q < pos]
                    after = [p for (q, p) in named if q > pos]
                    owner = before[-1] if before else (current or (after[0] if after else None))
                self.check_flag_span(b, owner, val, problems)
            if progs:
                current = progs[-1][1]
        return current

    def span_program(self, b, span, problems):
        """The program a code span names (a command, or a program alone);
        a command is checked as one."""
        if re.match(r"^--?[A-Za-z]", span):
            return None
        words = self.command_words(span)
        if not words:
            self.check_env_assignments(span, problems)
            return None
        prog = innermost_program(words)
        if prog and prog[0] == "tool":
            if len(words) > 1 or "=" in span:
                self.check_command(b, span, problems)
            return prog
        if prog or words[0] in ("make", "cmake", "mpirun", "srun"):
            if len(words) > 1 or "=" in span:
                self.check_command(b, span, problems)
            return ("other", prog[1] if prog else words[0], None)
        return None

    def check_prose(self, rel, blocks):
        """Every code span of a page's prose and tables, and every flag table
        (a table whose first column holds options), against the --help of
        the tool they belong to."""
        lines = self.page_text(rel).split("\n")
        current = None
        for unit in prose_units(lines):
            if unit[0] == "block":
                b = blocks[unit[2]] if unit[2] < len(blocks) else None
                if b is not None and b.lang in SHELL_LANGS:
                    current = self.last_program.get((b.path, b.line), current)
                continue
            problems = []
            if unit[0] == "text":
                b = Block(rel, unit[1], "", [], "", None)
                current = self.check_text(b, unit[2], current, problems)
                if problems:
                    self.report(b, False, "; ".join(problems))
                continue
            _, line, header, rows = unit
            cols = []
            for cell in header:
                named = [e[2] for e in text_events(cell) if e[1] == "prog"] + \
                    [p for p in (self.span_program(Block(rel, line, "", [], "", None), s, [])
                                 for s in re.findall(r"`([^`]+)`", cell)) if p]
                cols.append(named[0] if named else None)
            owner = cols[0] if cols and cols[0] else current
            first_col = set()
            for row_line, cells in rows:
                b = Block(rel, row_line, "", [], "", None)
                problems = []
                for j, cell in enumerate(cells):
                    fixed = cols[j] if j < len(cols) else None
                    self.check_text(b, cell, owner, problems, fixed=fixed)
                    if j == 0:
                        for span in re.findall(r"`([^`]+)`", unescape_cell(cell)):
                            for w in span.split():
                                if re.match(r"^--?[A-Za-z]", w):
                                    first_col.add(re.split(r"[=\[]", w)[0])
                if problems:
                    self.report(b, False, "; ".join(problems))
            if owner and owner[0] == "tool" and len(first_col) >= 4:
                self.check_table_complete(rel, line, owner, first_col)

    def check_table_complete(self, rel, line, owner, first_col):
        """A table that lists most of a tool's options must list them all."""
        _, listed = self.help_opts(owner[1], owner[2])
        if not listed:
            return
        shorts = {o[:2] for o in first_col if re.match(r"^-[A-Za-z]", o) and
                  not o.startswith("--")}
        have = set(first_col) | shorts
        if len(have & listed) * 2 < len(listed):
            return  # a table of some options, not the reference
        missing = sorted(listed - have)
        b = Block(rel, line, "", [], "", None)
        self.report(b, not missing, "flag table lists every option of %s --help" % owner[1]
                    if not missing else "flag table of %s lacks %s (its --help lists them)"
                    % (owner[1], ", ".join(missing)))

    # ---------------------------------------------------- output samples
    def check_samples(self, rel, blocks):
        """A gs-bench command followed by the output it prints: run it (gsrun
        on loopback, small sizes) and compare what does not depend on timing:
        the header lines, and in every row the type, op, root, the #wrong
        column's kind (a count or N/A) and the forced algorithm."""
        lines = self.page_text(rel).split("\n")
        for k in range(len(blocks) - 1):
            cmd, out = blocks[k], blocks[k + 1]
            if cmd.lang not in ("sh", "bash") or out.lang != "":
                continue
            between = lines[cmd.line + cmd.text.count("\n") + 1:out.line - 1]
            if any(x.strip() for x in between):
                continue
            text = cmd.text.strip()
            if "\n" in text or "gs-bench" not in text or not text.startswith("build/tools/gsrun"):
                continue
            if not out.text.lstrip().startswith("[0]"):
                continue
            self.run_sample(cmd, out, text)

    def run_sample(self, cmd, out, text):
        words = shlex.split(text)
        words = [os.path.join(self.build, w[len("build/"):]) if w.startswith("build/") else w
                 for w in words]
        if not os.access(words[0], os.X_OK) or not any(os.access(w, os.X_OK) for w in words[1:]
                                                       if "gs-bench" in w):
            self.skip.append(cmd.where() + " (sample output: a tool is not built)")
            return
        words = words[:1] + ["--timeout", "120"] + words[1:]
        env = dict(os.environ)
        env.setdefault("GS_TIMEOUT_MS", "30000")
        rc, real = run(words, timeout=180, env=env, cwd=self.work)
        if rc != 0:
            self.report(out, False, "the command above exits %d:\n%s" % (rc, real))
            return

        def rows(text_):
            # The #wrong and algo columns are found by their names in the column header
            # ("# size count ... #wrong floor algo"; its "#" is no column), so that a column
            # added before them changes nothing; without that header, nccl-tests' places.
            heads, data = [], []
            col = {"#wrong": 8, "algo": 9}
            for line in text_.split("\n"):
                line = re.sub(r"^\[0\]\s?", "", line).rstrip()
                if line.startswith("#") and re.search(r"(place|size|\(B\))", line) and \
                        "bytes:" not in line:
                    heads.append(" ".join(line.split()))
                    names = line.split()[1:]
                    if "#wrong" in names:
                        col = {k: names.index(k) if k in names else len(names) for k in col}
                elif re.match(r"^\s*\d+\s+\d+\s", line):
                    t = line.split()
                    algo = t[col["algo"]] if len(t) > col["algo"] else ""
                    forced = algo if "->" not in algo else algo.split("->")[0] + "->"
                    wrong = t[col["#wrong"]] if len(t) > col["#wrong"] else ""
                    data.append((t[0], t[2], t[3], t[4],
                                 "N/A" if wrong == "N/A" else "a count", forced))
            return heads, data

        want_h, want_d = rows(out.text)
        got_h, got_d = rows(real)
        problems = ["the header line '%s' is now '%s'" % (h, g) for h, g in zip(want_h, got_h)
                    if h.split(" gradsync ")[0] != g.split(" gradsync ")[0]]
        for w in want_d:
            if w not in got_d:
                problems.append("no row like size %s, %s, op %s, root %s, #wrong %s, algo %s "
                                "(got: %s)" % (w + (", ".join(" ".join(d) for d in got_d
                                                              if d[0] == w[0]),)))
        self.report(out, not problems, "sample output matches a run of the command above"
                    if not problems else "; ".join(problems))

    # --------------------------------------------------------------- python
    def check_python(self, b):
        try:
            compile(b.text, b.where(), "exec")
        except SyntaxError as e:
            # A signature written as a call (`comm = Communicator(rank=None, *, ...)`).
            sig = re.sub(r"^\s*(?:\w+\s*=\s*)?[\w.]+\(", "def signature(", b.text, count=1)
            try:
                compile(sig.rstrip() + ": pass\n", b.where(), "exec")
            except SyntaxError:
                self.report(b, False, "Python does not parse: %s" % e)
                return
        if b.path not in ROOT_PAGES:
            self.report(b, True, "Python parses")
            return
        mods = set(re.findall(r"^\s*import\s+([\w, ]+?)(?:\s+as\s+\w+)?\s*$", b.text, re.M))
        names = set()
        for m in mods:
            for part in m.split(","):
                names.add(part.split()[0].split(".")[0] if part.split() else "")
        names |= set(re.findall(r"^\s*from\s+(\w+)", b.text, re.M))
        prose = re.sub(r"```.*?```", "", self.page_text(b.path), flags=re.S)
        stdlib = getattr(sys, "stdlib_module_names", ())
        unsaid = sorted(n for n in names if n and n not in stdlib and n != "gradsync" and
                        not re.search(r"\b%s\b" % re.escape(n), prose))
        self.report(b, not unsaid, "Python parses; its modules are named in the prose"
                    if not unsaid else "the example imports %s, which the page never says it "
                    "needs" % ", ".join(unsaid))

    def check(self, files):
        self.check_status_rows()
        for rel in files:
            self.check_links(rel)
        for rel in files:
            blocks = extract_blocks(self.src, rel)
            for b in blocks:
                if b.lang == "c":
                    self.check_c(b)
                elif b.lang in SHELL_LANGS:
                    self.check_shell(b)
                elif b.lang == "python":
                    self.check_python(b)
            self.check_prose(rel, blocks)
            self.check_names(rel)
            self.check_samples(rel, blocks)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("-")]
    keep = None
    if "--keep" in argv:
        keep = argv[argv.index("--keep") + 1]
        args.remove(keep)
    if len(args) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    src, build = (os.path.abspath(a) for a in args)
    chk = Checker(src, build, keep=keep, verbose=("-v" in argv))
    chk.check(find_markdown(src))
    for s in chk.skip:
        print("skip %s" % s)
    for t in sorted(chk.missing_tools):
        print("skip the command lines of %s: not built in %s" % (t, build))
    print("docs_code_blocks: %d passed, %d failed, %d skipped; %d option spans of prose "
          "checked" % (chk.ok, len(chk.fail), len(chk.skip), chk.nspans))
    if keep is None:
        shutil.rmtree(chk.work, ignore_errors=True)
    return 1 if chk.fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
