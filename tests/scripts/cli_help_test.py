"""Every command-line tool reads its flags with one library (base/cli, gflags):
--help exits 0 and lists every flag with its default; an unknown flag is one line on
stderr and exit 2; --flagfile works where the tool can run briefly here.

    cli_help_test.py SRCDIR NAME=PATH...
"""

import os
import subprocess
import sys
import tempfile

# The flags each tool must list (all of them: a flag missing from --help fails).
FLAGS = {
    "tent-topo": ["topology", "human", "config", "cpus", "rails", "background_lcores",
                  "reserve_cpus"],
    "timer_floor": ["window_ns", "gap_ns", "duration_s", "threads"],
    "lcore_ring_bench": ["iterations", "burst", "cpus", "producers", "producer_sync",
                         "ring_sync"],
    "fabric_bench": ["provider", "qps", "size", "opcode", "depth", "link_gbps", "latency_ns",
                     "duration", "iters", "warmup", "processes", "device"],
    # Mooncake's tebench flag names (perf scripts use them).
    "tebench": ["backend", "xport_type", "seg_type", "metadata_type", "config",
                "target_seg_name", "total_buffer_size", "op_type", "check_consistency",
                "start_block_size", "max_block_size", "start_batch_size", "max_batch_size",
                "start_num_threads", "max_num_threads", "duration", "warmup",
                "tent_intent_type", "poll_mode", "workload_classes_json", "run_label"],
}


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def check_help(name, path):
    r = run([path, "--help"])
    assert r.returncode == 0, f"{name} --help: exit {r.returncode}: {r.stderr}"
    assert "usage" in r.stdout, f"{name} --help: no usage line"
    for flag in FLAGS[name]:
        lines = [l for l in r.stdout.splitlines() if l.strip().startswith(f"--{flag}")]
        assert lines, f"{name} --help does not list --{flag}:\n{r.stdout}"
        assert "(default: " in lines[0], f"{name} --help: --{flag} without its default"
    assert "--flagfile" in r.stdout, f"{name} --help does not mention --flagfile"
    bad = run([path, "--no_such_flag=1"])
    assert bad.returncode == 2, f"{name} --no_such_flag: exit {bad.returncode}"
    assert len(bad.stderr.strip().splitlines()) == 1, f"{name}: {bad.stderr!r}"
    assert "no_such_flag" in bad.stderr


def check_flagfile(name, path, srcdir):
    with tempfile.NamedTemporaryFile("w", suffix=".flags", delete=False) as f:
        if name == "timer_floor":
            f.write("--window_ns=1000\n--gap_ns=10\n--duration_s=0.1\n--threads=2\n")
        else:
            xml = os.path.join(srcdir, "tests", "topology", "data", "two_socket.xml")
            f.write(f"--topology={xml}\n--human\n")
    try:
        r = run([path, f"--flagfile={f.name}"])
        assert r.returncode == 0, f"{name} --flagfile: exit {r.returncode}: {r.stderr}"
        if name == "timer_floor":
            assert "window_ns=1000 gap_ns=10" in r.stdout and "threads=2" in r.stdout, r.stdout
        else:
            assert "rails: " in r.stdout or "NUMA" in r.stdout, r.stdout
    finally:
        os.unlink(f.name)


def main():
    srcdir = sys.argv[1]
    tools = dict(arg.split("=", 1) for arg in sys.argv[2:])
    assert tools and set(tools) <= set(FLAGS), f"tools given: {sorted(tools)}"
    for name, path in sorted(tools.items()):
        check_help(name, path)
        if name in ("timer_floor", "tent-topo"):
            check_flagfile(name, path, srcdir)
        print(f"ok {name}")


if __name__ == "__main__":
    main()
