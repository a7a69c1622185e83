#!/usr/bin/env python3
"""The floors rule: which folder of the product may include which.

Each floor is one folder and one meson library with its own include view, so the
build already refuses an include of a floor a library does not depend on. This test
keeps the finer rules the build cannot see, and the list itself (docs/architecture.md,
"Floors"):
  - a floor includes only the floors listed below for it (its own folder included);
  - nothing below engine/ (base, config, topology, lcore) includes the engine;
  - datapath never includes control or net; model never includes datapath or control;
    net never includes model; only fabric/select includes a provider's folder;
  - no include climbs out of its folder with "../", and no include names a folder by
    its repository path ("engine/...").
Usage: layers.py SOURCE_ROOT; exit 1 with one line per finding."""
import pathlib
import re
import sys

# Folder -> the include prefixes it may use besides its own. An include's prefix is the
# first path component, or the first two for fabric's sub-folders ("fabric/soft").
# "tent" is the public API: tent/status.h, tent/log.h and tent/log_sink.h live in base,
# tent/transfer_engine.h in engine/include.
PUBLIC_BASE = {"tent/status.h", "tent/log.h", "tent/log_sink.h"}
FLOORS = {
    "base": [],
    # The command-line tools' flags (gflags): a library of its own beside base, so that
    # only the tools link gflags; it includes base only.
    "base/cli": ["base"],
    "config": ["base"],
    "topology": ["config", "base"],
    "lcore": ["topology", "config", "base"],
    "engine/include/tent": ["base"],
    "engine/cuda": ["base"],
    "engine/fabric": ["base"],
    "engine/fabric/soft": ["fabric", "cuda", "config", "topology", "base"],
    "engine/fabric/verbs": ["fabric", "cuda", "config", "base"],
    "engine/fabric/tcp": ["fabric", "cuda", "config", "base"],
    "engine/fabric/select": ["fabric", "fabric/soft", "fabric/tcp", "fabric/verbs", "cuda", "config",
                             "topology", "base"],
    "engine/wire": ["fabric", "base"],
    "engine/notify": ["wire", "fabric", "base"],
    "engine/net": ["wire", "base"],
    "engine/fleet": ["net", "wire", "config", "base"],
    "engine/model": ["notify", "tent", "cuda", "fabric", "wire", "config", "topology", "lcore", "base"],
    "engine/datapath": ["notify", "model", "tent", "cuda", "fabric", "wire", "config", "topology", "lcore", "base"],
    "engine/control": ["notify", "net", "fleet", "model", "tent", "cuda", "fabric", "wire", "config", "topology", "lcore",
                       "base"],
    "engine/transport": ["notify", "control", "datapath", "net", "fleet", "model", "tent", "cuda", "fabric", "wire",
                         "config", "topology", "lcore", "base"],
    "engine/metrics": ["tent", "base"],
    "engine/api": ["notify", "transport", "metrics", "fabric/select", "control", "datapath", "net", "fleet", "model",
                   "tent", "cuda", "fabric", "wire", "config", "topology", "lcore", "base"],
}
# The prefix a folder's own headers are included with.
OWN_PREFIX = {
    "base": "base", "base/cli": "base", "config": "config", "topology": "topology", "lcore": "lcore",
    "engine/include/tent": "tent", "engine/fabric": "fabric", "engine/fabric/soft": "fabric/soft",
    "engine/fabric/verbs": "fabric/verbs", "engine/fabric/tcp": "fabric/tcp", "engine/fabric/select": "fabric/select",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def own_prefix(folder):
    return OWN_PREFIX.get(folder, folder.split("/")[-1])


def prefix_of(include):
    parts = include.split("/")
    if include in PUBLIC_BASE:
        return "base"
    if parts[0] == "fabric" and len(parts) > 2:
        return "fabric/" + parts[1]
    return parts[0] if len(parts) > 1 else None


def folder_of(rel):
    parent = str(rel.parent)
    if parent.startswith("base/include"):
        return "base"
    return parent if parent in FLOORS else None


def check(root):
    problems, files = [], 0
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cc") or not path.is_file():
            continue
        rel = path.relative_to(root)
        if rel.parts[0] not in ("base", "config", "topology", "lcore", "engine"):
            continue
        folder = folder_of(rel)
        if folder is None:
            problems.append(f"{rel}: not in a floor folder (add it to tests/lint/layers.py)")
            continue
        files += 1
        allowed = set(FLOORS[folder]) | {own_prefix(folder)}
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            if ".." in inc.split("/"):
                problems.append(f"{rel}:{n}: climbs out of its folder: {inc}")
                continue
            if inc.startswith("engine/"):
                problems.append(f"{rel}:{n}: names a repository path, not a floor: {inc}")
                continue
            prefix = prefix_of(inc)
            if prefix is None:  # a file beside the includer
                if not (path.parent / inc).is_file():
                    problems.append(f"{rel}:{n}: no such file beside it: {inc}")
                continue
            if prefix not in allowed:
                problems.append(f"{rel}:{n}: {folder} may not include {prefix}/ ({inc}); "
                                f"it may include {', '.join(sorted(allowed))}")
    return files, problems


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    files, problems = check(root)
    for p in problems:
        print(p)
    print(f"layers: {files} files, {len(problems)} findings", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
