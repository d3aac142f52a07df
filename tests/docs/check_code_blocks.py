#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compile, run and check every code block of README.md and docs/**/*.md.

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
is a gradsync tool. Nothing is run. A tool this build does not have
(gs-bench with GS_BUILD_BENCH=OFF) is reported and its lines skipped.

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
C_FENCE = re.compile(r"^(\s*)```\s*c(\s+.*)?$")
FENCE = re.compile(r"^(\s*)```\s*([A-Za-z0-9_+-]*)(.*)$")
CONTEXT_COMMENT = re.compile(r"^\s*<!--\s*context:(.*?)-->\s*$")


class Block:
    def __init__(self, path, line, lang, info, text, context):
        self.path, self.line, self.lang, self.info = path, line, lang, info
        self.text, self.context = text, context

    def where(self):
        return "%s:%d" % (self.path, self.line)


def find_markdown(src):
    files = ["README.md"]
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
        i = 0
        while i < len(args):
            a = args[i]
            if a == "ELIDED":
                return True
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
            if tool == "gsrun" and a in ("--nranks", "--nproc-per-node", "--nnodes",
                                         "--node-rank", "--port", "--master-port", "--addr",
                                         "--master-addr", "--timeout"):
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
        problems, seen = [], 0
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
                words = self.command_words(cmd)
                if words and os.path.basename(words[0]) in TOOLS:
                    if self.check_tool(b, words, problems):
                        seen += 1
        if seen:
            self.report(b, not problems, "%d tool command(s) checked" % seen if not problems
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

    def check(self, files):
        self.check_status_rows()
        for rel in files:
            self.check_links(rel)
        for rel in files:
            for b in extract_blocks(self.src, rel):
                if b.lang == "c":
                    self.check_c(b)
                elif b.lang in ("sh", "bash", "shell", "console", ""):
                    self.check_shell(b)


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
    print("docs_code_blocks: %d passed, %d failed, %d skipped"
          % (chk.ok, len(chk.fail), len(chk.skip)))
    if keep is None:
        shutil.rmtree(chk.work, ignore_errors=True)
    return 1 if chk.fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
