#!/usr/bin/env python3
"""The datapath rule (docs/architecture.md, "Conventions"): no allocation, lock,
blocking call, syscall, exception or log above debug, and every function noexcept.
Checked over
  - every file of the datapath floor (engine/datapath/) and every *_datapath.cc of
    the product (base/, engine/, lcore/, topology/): every line, every function;
  - the model floor (engine/model/): the body of every noexcept function (the model's
    hot functions, called by both paths); its setup code is not checked.
A function that only sets up or tears down (a constructor, init, stats) in a file of
the datapath floor carries a setup waiver on the line above its definition; its body
is then not checked:
    // datapath-lint: allow(setup) builds the ring before the poller is attached

Error returns are the one place a message may be built: a statement that starts
with `return Status::`, `return Result` or `return st` (a Status or Result for the
caller, the RFC's API shape) is exempt from the allocation rule; the success path
is checked at run time by tests/engine/datapath/no_alloc_test.cc (a counting allocator).

A line may carry a waiver naming the rule and why:
    nanosleep(&ts, nullptr);  // datapath-lint: allow(blocking) the idle policy's sleep
Usage: datapath_lint.py SOURCE_ROOT [FILE...]; exit 1 with one line per finding."""
import pathlib
import re
import sys

RULES = {
    "allocation": r"\bnew\b(?!_)|\b(malloc|calloc|realloc|strdup)\s*\(|\bmake_(shared|unique)\b|"
                  r"\.(push_back|emplace_back|emplace|insert|resize|reserve|append)\s*\(|"
                  r"\bstd::(string|function)\s*[({]|"
                  r"\bstd::(string|vector<[^;]*>|map<[^;]*>|unordered_map<[^;]*>|deque<[^;]*>|"
                  r"function<[^;]*>)\s+\w+\s*[=({;]|"
                  r"\bto_string\s*\(",
    "lock": r"\bstd::(mutex|recursive_mutex|shared_mutex|timed_mutex|condition_variable)\b|"
            r"\b(lock_guard|unique_lock|scoped_lock|shared_lock)\b|\.lock\s*\(\s*\)|"
            r"\bpthread_mutex_",
    "blocking": r"\b(sleep|usleep|nanosleep|sleep_for|sleep_until|clock_nanosleep|"
                r"sched_yield|yield)\s*\(",
    "syscall": r"(?<![\w.>:])(::)?(read|write|recv|send|sendmsg|recvmsg|poll|epoll_wait|"
               r"epoll_ctl|ioctl|syscall|futex|eventfd_write|eventfd_read|open|close|mmap|"
               r"munmap)\s*\(",
    "log": r"\b(printf|fprintf|puts|fputs|perror)\s*\(|\bstd::(cout|cerr|clog)\b|"
           r"\bTENT_(INFO|WARN|ERROR)\s*\(",
    "exception": r"\bthrow\b|\btry\s*\{|\bcatch\s*\(",
}
WAIVER = re.compile(r"datapath-lint:\s*allow\(([a-z, ]+)\)\s*\S")
ERROR_RETURN = re.compile(r"\breturn\s+(Status::|Result\b|st\b|s\b|status\b)")


def strip(text):
    """Comments and string literals blanked (newlines kept), so patterns see code."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def error_return_lines(code_lines):
    """Line numbers (0-based) inside a `return Status::...;` statement."""
    exempt, inside = set(), False
    for k, line in enumerate(code_lines):
        if not inside and ERROR_RETURN.search(line):
            inside = True
        if inside:
            exempt.add(k)
            if ";" in line:
                inside = False
    return exempt


FUNC_START = re.compile(r"^[A-Za-z_][\w:<>,\s\*&]*?\b[\w:~]+\s*\(")


def missing_noexcept(code_lines):
    """Top-level function definitions (column 0) without noexcept."""
    found = []
    k = 0
    while k < len(code_lines):
        line = code_lines[k]
        if FUNC_START.match(line) and not re.match(
                r"^(namespace|struct|class|enum|union|using|typedef|template|extern|static_assert|"
                r"return|if|for|while|switch)\b", line):
            sig, j = line, k
            while not re.search(r"[{;]\s*$", sig) and j + 1 < len(code_lines) and j - k < 8:
                j += 1
                sig += " " + code_lines[j].strip()
            if sig.rstrip().endswith("{") and "noexcept" not in sig and "=" not in sig.split("(")[0]:
                found.append(k)
            k = j + 1
        else:
            k += 1
    return found


def body_end(code_lines, k):
    """The line of the brace closing the first body opened at or after line k."""
    depth, opened = 0, False
    for j in range(k, len(code_lines)):
        for c in code_lines[j]:
            if c == "{":
                depth, opened = depth + 1, True
            elif c == "}":
                depth -= 1
                if opened and depth == 0:
                    return j
    return len(code_lines) - 1


def setup_lines(raw, code):
    """Lines inside functions whose definition follows a setup waiver."""
    lines = set()
    for k, line in enumerate(raw):
        m = WAIVER.search(line)
        if m and "setup" in {w.strip() for w in m.group(1).split(",")} and line.strip().startswith("//"):
            lines.update(range(k, body_end(code, k + 1) + 1))
    return lines


NOEXCEPT_BODY = re.compile(r"\bnoexcept\b[^;{}()]*\{")


def noexcept_body_lines(code):
    """Lines inside the bodies of noexcept functions (signature and body)."""
    lines = set()
    for k, line in enumerate(code):
        if NOEXCEPT_BODY.search(line) or (re.search(r"\bnoexcept\b[^;{}]*$", line) and k + 1 < len(code)
                                          and code[k + 1].strip().startswith(("{", ":"))):
            lines.update(range(k, body_end(code, k) + 1))
    return lines


def lint(path, root, only_noexcept_bodies=False):
    raw = path.read_text().splitlines()
    code = strip(path.read_text()).splitlines()
    exempt = error_return_lines(code)
    rel = path.relative_to(root)
    problems = []
    skip = setup_lines(raw, code)
    checked = noexcept_body_lines(code) if only_noexcept_bodies else None
    for k, line in enumerate(code):
        if k in skip or (checked is not None and k not in checked):
            continue
        waived = set()
        m = WAIVER.search(raw[k]) or (k > 0 and WAIVER.search(raw[k - 1]) and raw[k - 1].strip().startswith("//")
                                      and WAIVER.search(raw[k - 1]))
        if m:
            waived = {w.strip() for w in m.group(1).split(",")}
        for rule, pattern in RULES.items():
            if rule in waived or (rule == "allocation" and k in exempt):
                continue
            if re.search(pattern, line):
                problems.append(f"{rel}:{k + 1}: {rule}: {raw[k].strip()}")
    for k in ([] if only_noexcept_bodies else missing_noexcept(code)):
        if k in skip:
            continue
        m = WAIVER.search(raw[k]) or (k > 0 and WAIVER.search(raw[k - 1]))
        if m and "noexcept" in m.group(1):
            continue
        problems.append(f"{rel}:{k + 1}: noexcept: {raw[k].strip()}")
    return problems


def datapath_files(root):
    floor = set((root / "engine" / "datapath").glob("*.cc"))
    named = {p for d in ("base", "engine", "lcore", "topology") for p in (root / d).rglob("*_datapath.cc")}
    return sorted(floor | named)


def model_files(root):
    return sorted(p for p in (root / "engine" / "model").iterdir() if p.suffix in (".h", ".cc"))


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    problems = []
    if len(sys.argv) > 2:
        files = [pathlib.Path(f).resolve() for f in sys.argv[2:]]
        for f in files:
            problems += lint(f, root)
    else:
        files = datapath_files(root) + model_files(root)
        for f in datapath_files(root):
            problems += lint(f, root)
        for f in model_files(root):
            problems += lint(f, root, only_noexcept_bodies=True)
    for p in problems:
        print(p)
    print(f"datapath lint: {len(files)} files, {len(problems)} findings", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
