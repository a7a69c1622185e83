"""Refuses a confusing mix with Mooncake's own ``tent`` module (package ``tent-core``).

Both are imported as ``tent``; whichever comes first on ``sys.path`` wins and hides the
other. When this package is the one imported and another ``tent`` lies further down the
path, importing raises ImportError naming both, unless ``TENT_CHOOSE=rdma`` says this
package (tent, the RDMA transfer engine) is meant. docs/python.md, "Side by side with
Mooncake".
"""

import os
import sys

CHOICE_ENV = "TENT_CHOOSE"


def _is_this_package(folder):
    return all(os.path.exists(os.path.join(folder, f)) for f in ("_error.py", "_coexist.py"))


def other_tents(here):
    """Places on sys.path, other than ours, that hold a module or package named tent."""
    ours = os.path.realpath(os.path.dirname(here))
    found = []
    for entry in sys.path:
        base = os.path.realpath(entry or os.getcwd())
        if base == ours or not os.path.isdir(base):
            continue
        folder = os.path.join(base, "tent")
        if os.path.isdir(folder):
            if not _is_this_package(folder):
                found.append(folder)
            continue
        try:
            names = os.listdir(base)
        except OSError:
            continue
        found += [os.path.join(base, n) for n in names
                  if n == "tent.py" or (n.startswith("tent.") and n.endswith(".so"))]
    return found


def check(here):
    if os.environ.get(CHOICE_ENV, "") == "rdma":
        return
    others = other_tents(here)
    if others:
        raise ImportError(
            f"two modules named 'tent' are on sys.path: this one (the RDMA transfer "
            f"engine, {os.path.dirname(here)}) and {', '.join(others)} (Mooncake's TENT "
            f"binding, package tent-core?). Set {CHOICE_ENV}=rdma to use this one, or "
            "remove one of them from the path (docs/python.md, 'Side by side with Mooncake')")
