from click.testing import CliRunner

from pal_slurm.cli.main import cli


def test_unknown_arm_is_refused_before_any_lab_starts():
    r = CliRunner().invoke(cli, ["replay", "--trace", "workload-1", "--arms", "stock,magic"])
    assert r.exit_code == 2 and "unknown arm(s) ['magic']" in r.output


def test_unknown_trace_is_a_clear_error():
    r = CliRunner().invoke(cli, ["replay", "--trace", "no-such-trace", "--arms", "stock"])
    assert r.exit_code != 0 and "no-such-trace" in r.output
