"""Java properties files, read as `java.util.Properties.load` reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.security.properties import (
    MAX_FILE_BYTES,
    PropertiesError,
    iter_properties,
    load_properties,
    parse_properties,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b", {"a": "b"}),
        ("a = b", {"a": "b"}),
        ("a:b", {"a": "b"}),
        ("a : b", {"a": "b"}),
        ("a b", {"a": "b"}),
        ("a    b c", {"a": "b c"}),
        ("a\tb", {"a": "b"}),
        ("a\fb", {"a": "b"}),
        ("   a=b", {"a": "b"}),
        ("a=b   ", {"a": "b   "}),
        ("a==b", {"a": "=b"}),
        ("a = = b", {"a": "= b"}),
        ("a = : b", {"a": ": b"}),
        ("a :=b", {"a": "=b"}),
        ("a", {"a": ""}),
        ("a=", {"a": ""}),
        ("a =", {"a": ""}),
        ("=b", {"": "b"}),
        (":b", {"": "b"}),
        ("a=b=c", {"a": "b=c"}),
        ("a=b:c", {"a": "b:c"}),
        ("a=b#c", {"a": "b#c"}),
        ("a\\=b=c", {"a=b": "c"}),
        ("a\\:b:c", {"a:b": "c"}),
        ("a\\ b c", {"a b": "c"}),
        ("a\\\\=b", {"a\\": "b"}),
        ("a=\\tb\\nc\\rd\\fe", {"a": "\tb\nc\rd\fe"}),
        ("a=\\u0041\\u00e9\\u20AC", {"a": "Aé€"}),
        ("a=\\q\\#\\!", {"a": "q#!"}),
        ("a=\\ b", {"a": " b"}),
        ("# comment\n! comment too\n  # indented\na=b", {"a": "b"}),
        ("a=1\na=2", {"a": "2"}),
        ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
        ("\n\n   \n\t\na=b\n\n", {"a": "b"}),
        ("a=b\\\n   c", {"a": "bc"}),
        ("a=b \\\n   c \\\n  d", {"a": "b c d"}),
        ("a=b\\\\\nc=d", {"a": "b\\", "c": "d"}),
        ("a=b\\\\\\\nc", {"a": "b\\c"}),
        ("a=b\\", {"a": "b"}),
        ("a=b\\\n", {"a": "b"}),
        ("a=b\\\n\nc=d", {"a": "b", "c": "d"}),
        ("a=b\\\n# not a comment", {"a": "b# not a comment"}),
        ("# comment ends in a backslash\\\na=b", {"a": "b"}),
        ("key\\\n  part=v", {"keypart": "v"}),
        ("\ufeffa=b", {"a": "b"}),
        (
            'sasl.jaas.config=x required \\\n    username="u" \\\n    password="p";',
            {"sasl.jaas.config": 'x required username="u" password="p";'},
        ),
    ],
)
def test_java_semantics(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_kafka_server_properties_shape() -> None:
    text = """
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,\\
    SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
log.dirs=/tmp/kraft-combined-logs
"""
    props = parse_properties(text)
    assert props["listener.security.protocol.map"] == (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL"
    )
    assert props["node.id"] == "1" and len(props) == 6


def test_line_numbers_are_those_where_entries_start() -> None:
    entries = list(iter_properties("# c\n\na=1\\\n  2\nb=3\nb=4"))
    assert [(e.key, e.value, e.line) for e in entries] == [
        ("a", "12", 3),
        ("b", "3", 5),
        ("b", "4", 6),
    ]


@pytest.mark.parametrize("text", ["a=\\u12", "a=\\uZZZZ", "a=\\u", "\\u00g0=b", "a=\\u12\\"])
def test_malformed_unicode_escape_names_source_and_line(text: str) -> None:
    with pytest.raises(PropertiesError, match=r"^f.properties:2: malformed \\uXXXX escape"):
        parse_properties("ok=1\n" + text, source="f.properties")


def test_control_characters_and_nul_pass_through_for_the_reader_to_judge() -> None:
    assert parse_properties("a=x\x00y\x1bz") == {"a": "x\x00y\x1bz"}


def test_load_reads_utf8_and_latin1(tmp_path: Path) -> None:
    utf8 = tmp_path / "u.properties"
    utf8.write_bytes("user=jürgen\n".encode())
    latin1 = tmp_path / "l.properties"
    latin1.write_bytes("user=jürgen\n".encode("latin-1"))
    assert load_properties(utf8) == load_properties(latin1) == {"user": "jürgen"}


def test_load_errors_are_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(PropertiesError, match="no such file") as missing:
        load_properties(tmp_path / "missing.properties")
    assert "\n" not in str(missing.value)
    with pytest.raises(PropertiesError, match="is a directory"):
        load_properties(tmp_path)
    huge = tmp_path / "huge.properties"
    huge.write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(PropertiesError, match="larger than"):
        load_properties(huge)
    bad = tmp_path / "bad.properties"
    bad.write_text("a=1\nb=\\uXY\n")
    with pytest.raises(PropertiesError, match=r"bad.properties:2:"):
        load_properties(bad)


def test_unreadable_file(tmp_path: Path) -> None:
    import os

    path = tmp_path / "secret.properties"
    path.write_text("a=b")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as a user who reads any file (root)")
        with pytest.raises(PropertiesError, match="cannot be read"):
            load_properties(path)
    finally:
        path.chmod(0o600)


def _escape(text: str, *, key: bool) -> str:
    """A reference writer (Java's `Properties.store` rules) for the round-trip property."""
    out = []
    for i, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "=:#!" or (char == " " and (key or i == 0)):
            out.append("\\" + char)
        elif char == "\t":
            out.append("\\t")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\f":
            out.append("\\f")
        elif not char.isprintable() or ord(char) > 0x7E:
            out.append(f"\\u{ord(char):04x}" if ord(char) < 0x10000 else char)
        else:
            out.append(char)
    return "".join(out)


@settings(max_examples=300)
@given(st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=8))
def test_what_java_would_store_reads_back(entries: dict[str, str]) -> None:
    text = "\n".join(f"{_escape(k, key=True)}={_escape(v, key=False)}" for k, v in entries.items())
    assert parse_properties("# stored\n" + text) == entries


def test_a_file_that_fails_to_read_even_for_root() -> None:
    # /proc/self/mem exists and opens, but reading its first page fails (EIO) for anyone.
    if not Path("/proc/self/mem").exists():
        pytest.skip("no /proc/self/mem here")
    with pytest.raises(PropertiesError, match=r"^/proc/self/mem: cannot be read \("):
        load_properties("/proc/self/mem")
