#!/usr/bin/env python3
"""Builds one probe of the floors rule and checks the compiler's answer: a floor's
include path must not reach the header of a floor above it ("refused": the compile
fails because that header is not found), and must reach one below it ("reached").
usage: floor_probe.py BUILD_ROOT TARGET_FULL_PATH refused|reached HEADER"""
import os
import subprocess
import sys

build, target, expect, header = sys.argv[1:5]
run = subprocess.run(["ninja", "-C", build, os.path.relpath(target, build)],
                     capture_output=True, text=True)
out = run.stdout + run.stderr
not_found = f"{header}: No such file or directory" in out
if expect == "refused":
    ok = run.returncode != 0 and not_found
else:
    ok = run.returncode == 0
print(f"{header}: {'refused' if not_found else 'reached' if run.returncode == 0 else 'error'}"
      f" (expected {expect})")
if not ok:
    print(out)
sys.exit(0 if ok else 1)
