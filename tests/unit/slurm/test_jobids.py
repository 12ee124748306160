"""Job ids as Slurm writes them, parsed by one function that never drops the `_` or `+`."""

import pytest

from pal_slurm.slurm.jobids import JobIdError, JobRef, parse_job_id


@pytest.mark.parametrize("text, ref", [
    ("1234", JobRef(1234)),
    (" 1234 ", JobRef(1234)),
    ("1234_5", JobRef(1234, array_task=5)),
    ("1234_0", JobRef(1234, array_task=0)),
    ("1234+1", JobRef(1234, het_offset=1)),
    ("4294967293", JobRef(4294967293)),
])
def test_slurm_forms(text, ref):
    assert parse_job_id(text) == ref and str(ref) == text.strip()


@pytest.mark.parametrize("text", ["12_34_5", "1234_", "_5", "1234_[1-3]", "1234_1,2", "0", "-1", "12 34", "1e3",
                                  "0x10", "1234+", "1234.batch", "", "4294967294", "9" * 40, "１２３"])
def test_refused(text):
    with pytest.raises(JobIdError, match="not a Slurm job id"):
        parse_job_id(text)


def test_an_array_task_is_never_the_number_python_would_read():
    assert int("1234_5") == 12345  # what explain used to look up
    assert parse_job_id("1234_5").job_id == 1234
