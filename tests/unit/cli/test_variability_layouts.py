"""Every per-GPU layout reads the same in `palctl simulate --variability` and `palctl
import-variability`: located where the file says, bare GPU UUIDs by position, no --map-to-nodes."""

import re
from pathlib import Path

import pytest

from pal_slurm.cli.main import cli

from .profiling_env import palctl  # noqa: F401 - fixture

FIXTURES = Path(__file__).parents[2] / "fixtures" / "variability"

# file -> the (node, slot) of its slowest GPU for class A, as both commands must place it
LAYOUTS = {
    "uuid-cabinet-node-device.csv": ("c005-002", 1),  # GPU UUIDs with cabinet,node,device columns
    "node-slot-ids.csv": ("c009-4", 2),  # `node-slot` ids
    "per-gpu-table.csv": ("node1", 3),  # Node_ID/Local_GPU_ID table
    "node-device.csv": ("c7-2", 0),  # cabinet,node,device columns, no GPU id
    "gpu-uuids.csv": ("node0", 3),  # bare GPU UUIDs: fourth in id order -> node0 slot 3
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layout_simulates_and_imports_alike(palctl, name):
    path = str(FIXTURES / name)
    r = palctl("simulate", "--synthetic", "20", "--synthetic-rate", "30", "--mode", "event",
               "--variability", f"A={path}", "--policies", "pal,packed-sticky", "--json")
    assert r.exit_code == 0, r.output
    assert f"variability: A from {path}" in r.output and '"cluster": "2x4"' in r.output
    r = palctl("import-variability", path, "--class", "A", "--rank")
    assert r.exit_code == 0, r.output
    assert "for 8 GPU(s), classes A" in r.output
    entries = [e for e in palctl.repo().latest_ranking().entries if e.perf_class == "A"]
    slowest = max(entries, key=lambda e: e.score)
    assert (slowest.node, slowest.slot) == LAYOUTS[name]
    assert len({(e.node, e.slot) for e in entries}) == 8


def test_placement_options_are_the_same_on_every_command_and_place_alike(palctl):
    for command in ("import-variability", "simulate", "whatif"):
        assert {"--map-to-nodes", "--gpus-per-node"} <= _options(command), command
    path = str(FIXTURES / "gpu-uuids.csv")
    for placing, cluster, where in ((["--gpus-per-node", "8"], "1x8", {("node0", s) for s in range(8)}),
                                    (["--map-to-nodes", "gpu[1-4]", "--gpus-per-node", "2"], "4x2",
                                     {(f"gpu{n}", s) for n in range(1, 5) for s in range(2)})):
        r = palctl("simulate", "--synthetic", "10", "--mode", "event", "--variability", f"A={path}", *placing,
                   "--policies", "pal,packed-sticky", "--json")
        assert r.exit_code == 0 and f'"cluster": "{cluster}"' in r.output, r.output
        r = palctl("import-variability", f"A={path}", *placing)
        assert r.exit_code == 0, r.output
        assert {(s.node, s.slot) for s in palctl.repo().samples() if s.node.startswith(("node", "gpu"))} >= where


def test_class_spec_works_on_import_too(palctl):
    path = str(FIXTURES / "gpu-uuids.csv")
    r = palctl("import-variability", f"a={path}")
    assert r.exit_code == 0 and "classes A" in r.output, r.output
    r = palctl("import-variability", f"A={path}", "--class", "B")
    assert r.exit_code == 2 and "disagree" in r.output


def _options(command: str) -> set[str]:
    return {"--help"} | {o for p in cli.commands[command].params for o in (*p.opts, *p.secondary_opts)}


def test_every_error_names_an_option_the_command_has(palctl, tmp_path):
    no_class = tmp_path / "runs.csv"
    no_class.write_text("uuid,perf\nGPU-1,1.0\nGPU-2,1.1\n")
    junk = tmp_path / "junk.csv"
    junk.write_text("a,b\n1,2\n")
    table = str(FIXTURES / "per-gpu-table.csv")
    cases = {
        "simulate": [["--synthetic", "5", "--variability", str(no_class)],
                     ["--synthetic", "5", "--variability", str(junk)],
                     ["--synthetic", "5", "--variability", "store"],
                     ["--synthetic", "5", "--map-to-nodes", "g[1-2]"],
                     ["--synthetic", "5", "--variability", str(table), "--map-to-nodes", "g[1-9]"]],
        "import-variability": [[str(no_class)], [str(junk)], [table, "--map-to-nodes", "g[1-9]"],
                               [table, "--map-to-nodes", "g[1-"], [f"A={no_class}", "--class", "B"]],
    }
    named = 0
    for command, arg_lists in cases.items():
        for args in arg_lists:
            r = palctl(command, *args)
            assert r.exit_code in (1, 2), (command, args, r.output)
            # an option after `palctl OTHER` is OTHER's; any other is the failing command's
            for other, opts in re.findall(r"palctl ([a-z-]+)((?: --[a-z][a-z-]*)+)", r.output):
                assert set(opts.split()) <= _options(other), (command, args, r.output)
            rest = re.sub(r"palctl [a-z-]+(?: --[a-z][a-z-]*)+", "", r.output)
            for opt in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest):
                assert opt in _options(command), (command, args, r.output)
                named += 1
    assert named >= 4  # the class and node hints name their options
