"""array_items: one array member of a JSON object, element by element, errors with line and column."""

import json

import pytest

from pal_slurm import json_stream
from pal_slurm.input_files import InputError
from pal_slurm.json_stream import array_items


def items(tmp_path, text, member="jobs", **kw):
    p = tmp_path / "d.json"
    p.write_text(text)
    return list(array_items(p, member, **kw))


def test_the_member_among_others_in_any_order(tmp_path):
    doc = {"meta": {"a": [1, {"b": "]}"}]}, "jobs": [{"id": 1}, 2, "x", [3], None, 1.5e3], "warnings": []}
    assert items(tmp_path, json.dumps(doc, indent=2)) == doc["jobs"]
    assert items(tmp_path, json.dumps(doc)) == doc["jobs"]  # one line
    assert items(tmp_path, '{"jobs": []}') == []
    assert items(tmp_path, '{"jobs": [12\n,\n345\n]}') == [12, 345]  # a number split by no line


def test_long_documents_keep_their_positions(tmp_path, monkeypatch):
    monkeypatch.setattr(json_stream, "_KEEP", 16)  # compact after every element
    text = '{"jobs": [\n' + ",\n".join(f'  {{"id": {i}}}' for i in range(50)) + ',\n  {"id": 50,, }\n]}'
    with pytest.raises(InputError, match=r"d.json:52:13: not valid JSON: Expecting property name"):
        items(tmp_path, text)
    assert len(items(tmp_path, text.replace(",, }", "}"))) == 51


@pytest.mark.parametrize("text, message", [
    ('{"jobs": [', ":1:11: not valid JSON: Expecting value"),
    ('{"jobs": [1 2]}', ":1:13: not valid JSON: Expecting ',' delimiter"),
    ('{"jobs": [1]} x', ":1:15: not valid JSON: Extra data"),
    ('{"meta": 1}', ": no 'jobs' list; see"),
    ('{"jobs": {}}', ": no 'jobs' list; see"),
    ('{1: 2}', ":1:2: not valid JSON: Expecting property name"),
])
def test_errors(tmp_path, text, message):
    with pytest.raises(InputError) as exc:
        items(tmp_path, text, missing="; see")
    assert message in str(exc.value), str(exc.value)


def test_parse_constant_errors_pass_through(tmp_path):
    def reject(name):
        raise ValueError(f"{name} rejected")

    with pytest.raises(ValueError, match="NaN rejected"):
        items(tmp_path, '{"jobs": [NaN]}', parse_constant=reject)
