"""pal.lua's JSON codec against Python's json: what one side writes, the other reads."""

import json

from hypothesis import given, settings, strategies as st

from hook_harness import Hook, to_py

HOOK = Hook()
LUA = HOOK.lua
encode = LUA.eval("function(v) return package.loaded.pal.json.encode(v) end")
decode_to_table = LUA.eval(
    "function(s) local v, err = package.loaded.pal.json.decode(s);"
    " return {ok = (v ~= nil), value = v, typed = (v ~= nil) or (err:sub(1, 5) == 'json:')} end")
# For garbage input: whether it decoded and whether a failure was a typed "json:" message.
# (Values themselves may hold invalid UTF-8, which lupa cannot hand to Python as str.)
decode_status = LUA.eval(
    "function(s) local v, err = package.loaded.pal.json.decode(s);"
    " return {ok = (v ~= nil), typed = (v ~= nil) or (err:sub(1, 5) == 'json:')} end")
reencode = LUA.eval(
    "function(s) local j = package.loaded.pal.json; local v, err = j.decode(s);"
    " if v == nil then return nil end; return j.encode(v) end")

# Values both sides represent the same way: no empty containers (a Lua table cannot say
# whether {} was an object or an array), integers within 2^53, strings without NUL/surrogates.
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
scalars = st.none() | st.booleans() | st.integers(-2**53 + 1, 2**53 - 1) | st.floats(
    allow_nan=False, allow_infinity=False, width=64) | text
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, min_size=1, max_size=4)
    | st.dictionaries(text, inner, min_size=1, max_size=4),
    max_leaves=15,
)


@settings(max_examples=300)
@given(values)
def test_lua_reads_what_python_writes_and_writes_it_back_identically(value):
    line = json.dumps(value, ensure_ascii=True)
    out = reencode(line)
    assert out is not None
    assert json.loads(out) == value


@settings(max_examples=200)
@given(values)
def test_lua_reads_python_utf8_output_too(value):
    line = json.dumps(value, ensure_ascii=False)
    out = reencode(line.encode("utf-8"))
    assert out is not None
    assert json.loads(out) == value


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_lua_decoder_never_raises_on_garbage(data):
    result = decode_status(data)
    assert result.typed
    if result.ok:  # it accepted: then Python must accept the same text as JSON
        json.loads(data.decode("utf-8", "replace"))


def test_strict_rejections():
    for bad in ["", "01", "1.", "1.e5", "1e", "-", "[1,]", "{\"a\":1,}", "{a:1}", "'x'",
                "\"\\x\"", "\"a\nb\"", "[1] 2", "tru", "nul", "NaN", "Infinity", "1e999",
                "[" * 40 + "]" * 40]:
        assert not decode_to_table(bad).ok, bad


def test_encoder_escapes_control_characters_and_quotes():
    out = encode(LUA.table_from({"s": "a\"b\\c\n\x01\x7f"}))
    assert json.loads(out) == {"s": "a\"b\\c\n\x01\x7f"}
    assert "\n" not in out


def test_unicode_escapes_become_utf8():
    out = decode_to_table('"\\u00e9\\ud83d\\ude00\\ud800x"')
    assert out.ok
    assert to_py(out.value) == "é😀\ufffdx"
