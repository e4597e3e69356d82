"""A refused command writes nothing, even on a data directory that does not exist yet."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.cli.main import build_parser, main
from tests.support.cli import entries, mlog


def _run(args: list[str]) -> int:
    return main(args, out=io.StringIO())


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "create", "--topic", "orders"],  # no broker is registered
        ["topics", "create", "--topic", "__cluster_metadata", "--validate-only"],
        ["topics", "delete", "--topic", "nope"],
        ["brokers", "fence", "--id", "7"],
        ["namespaces", "delete", "--namespace", "nope"],
        ["topics", "create", "--topic", "ok", "--validate-only"],
    ],
    ids=" ".join,
)
def test_a_refused_command_on_a_new_directory_creates_nothing(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "new"
    code = _run(["--data-dir", str(data_dir), *args])
    assert code == 2
    assert not data_dir.exists()
    err = capsys.readouterr().err
    assert err.startswith("mlog: error: ") and len(err.strip().splitlines()) == 1


def test_the_first_accepted_command_still_bootstraps_the_log(tmp_path: Path) -> None:
    data_dir = tmp_path / "new"
    assert _run(["--data-dir", str(data_dir), "brokers", "register", "--id", "1"]) == 0
    out = io.StringIO()
    assert main(["--data-dir", str(data_dir), "log", "dump"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert "FEATURE_LEVEL_RECORD" in lines[0] and "REGISTER_BROKER_RECORD" in lines[1]


def test_history_takes_namespace_with_topic_and_names_a_bad_broker_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--data-dir", str(tmp_path)]
    assert _run([*base, "brokers", "register", "--id", "1"]) == 0
    assert _run([*base, "namespaces", "create", "--namespace", "org"]) == 0
    assert _run([*base, "topics", "create", "--topic", "ev", "--namespace", "org"]) == 0
    out = io.StringIO()
    assert main([*base, "history", "--topic", "ev", "--namespace", "org"], out=out) == 0
    assert "created topic org:ev" in out.getvalue()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([*base, "history", "--broker", "abc"], out=io.StringIO())
    assert exited.value.code == 2
    assert "'abc' is not a broker id" in capsys.readouterr().err


def test_an_abbreviated_force_is_refused_and_cuts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for broker in ("1", "2", "3"):
        assert _run(["--data-dir", str(tmp_path), "brokers", "register", "--id", broker]) == 0
    before = entries(tmp_path)
    capsys.readouterr()
    code, _ = mlog(tmp_path, "log", "truncate", "--after-offset", "1", "--f")
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown option --f; did you mean --force?" in err
    assert entries(tmp_path) == before
    # Nor an abbreviated value flag, on its own or beside the flag it abbreviates.
    code, _ = mlog(tmp_path, "log", "truncate", "--after", "1", "--force")
    assert code == 2
    assert "unknown option --after; did you mean --after-offset?" in capsys.readouterr().err
    assert entries(tmp_path) == before


def _command_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command's parser with the words that choose it (`("log", "truncate")`).

    argparse has no public listing of its subparsers: its `_actions` are read here.
    """
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield path, parser
    for action in subcommands:
        for name, sub in action.choices.items():
            yield from _command_parsers(sub, (*path, name))


def _long_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--")}


def test_no_command_takes_any_prefix_of_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    # The sweep: every strict prefix of every long flag of every command, where the prefix
    # is not a flag itself, is refused naming it (what argparse's abbreviations took).
    parser = build_parser(filled=True)
    global_flags = _long_flags(parser)
    tried = 0
    for path, command in _command_parsers(parser):
        flags = _long_flags(command)
        prefixes = {f[:k] for f in flags for k in range(3, len(f))} - flags - global_flags
        for prefix in sorted(prefixes):
            argv = [*path, prefix]
            with pytest.raises(SystemExit) as exited:
                parser.parse_args(argv)
            err = capsys.readouterr().err
            assert exited.value.code == 2, argv
            # Named as unknown, or as a Kafka tool's flag with where it goes instead.
            named = (f"error: unknown option {prefix}", f"error: {prefix} is ")
            assert any(text in err for text in named), (argv, err)
            tried += 1
    assert tried > 1000  # every command's flags were reached
