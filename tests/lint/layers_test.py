#!/usr/bin/env python3
"""Tests of the floors rule (layers.py): each forbidden include is found, the allowed
ones are not, and the repository itself is clean.
Usage: layers_test.py SOURCE_ROOT"""
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import layers  # noqa: E402

ROOT = None


def tree(files):
    """A throw-away source tree: {relative path: text}."""
    tmp = tempfile.TemporaryDirectory()
    for rel, text in files.items():
        p = pathlib.Path(tmp.name) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp


def findings(files):
    with tree(files) as root:
        return layers.check(pathlib.Path(root))[1]


class Layers(unittest.TestCase):
    def assertRefused(self, includer, include, words):
        problems = findings({includer: f'#include "{include}"\n'})
        self.assertEqual(len(problems), 1, problems)
        self.assertIn(words, problems[0])

    def test_the_repository_keeps_its_floors(self):
        files, problems = layers.check(ROOT)
        self.assertGreater(files, 100)
        self.assertEqual(problems, [])

    def test_datapath_never_includes_control_or_net(self):
        self.assertRefused("engine/datapath/x.cc", "control/control_plane.h",
                           "engine/datapath may not include control/")
        self.assertRefused("engine/datapath/x.cc", "net/event_loop.h",
                           "engine/datapath may not include net/")

    def test_model_never_includes_datapath_or_control(self):
        self.assertRefused("engine/model/x.h", "datapath/direct_path.h",
                           "engine/model may not include datapath/")
        self.assertRefused("engine/model/x.h", "control/peer_segments.h",
                           "engine/model may not include control/")

    def test_net_never_includes_model(self):
        self.assertRefused("engine/net/x.cc", "model/rdma_task.h", "engine/net may not include model/")

    def test_nothing_below_the_engine_includes_it(self):
        self.assertRefused("config/x.cc", "tent/transfer_engine.h", "config may not include tent/")
        self.assertRefused("lcore/x.cc", "fabric/fabric.h", "lcore may not include fabric/")
        self.assertRefused("base/x.cc", "config/config.h", "base may not include config/")

    def test_only_select_reaches_a_provider(self):
        self.assertRefused("engine/model/x.cc", "fabric/soft/soft_provider.h",
                           "engine/model may not include fabric/soft/")
        self.assertEqual(findings({"engine/fabric/select/x.cc":
                                   '#include "fabric/soft/soft_provider.h"\n'}), [])

    def test_paths_that_bypass_the_views(self):
        self.assertRefused("engine/model/x.cc", "../control/control_plane.h", "climbs out")
        self.assertRefused("engine/api/x.cc", "engine/control/control_plane.h",
                           "names a repository path")

    def test_a_new_folder_must_be_placed(self):
        self.assertRefused("engine/rdma/x.cc", "model/rdma_task.h", "not in a floor folder")

    def test_downward_and_own_includes_pass(self):
        self.assertEqual(findings({
            "engine/datapath/a.cc": '#include "datapath/b.h"\n#include "model/rdma_task.h"\n'
                                    '#include "tent/status.h"\n#include "base/clock.h"\n',
            "engine/datapath/b.h": "",
            "engine/transport/t.cc": '#include "control/x.h"\n#include "datapath/b.h"\n',
            "config/c.cc": '#include "tent/status.h"\n#include "tent/log.h"\n',
        }), [])


if __name__ == "__main__":
    ROOT = pathlib.Path(sys.argv.pop(1)).resolve()
    unittest.main(verbosity=2)
