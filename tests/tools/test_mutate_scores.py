"""The runner's score table (`tools/mutate/scores.py`): a run's row written, a judgement kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.mutate.scores import HEADER, TABLE, TO_JUDGE, Row, record, updated

TEXT = f"""# Scores

{HEADER}
| --- | --- | ---: | ---: | ---: | ---: |
| `records/codec.py` | whole | 247 | 244 | 98.8% | **100.0%** |
| `replay/rules.py` | whole | 106 | 100 | 94.3% | **97.0%** |

After the table.
"""


def _row(text: str, module: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith(f"| `{module}`")]
    return line


def test_the_same_counts_keep_the_judged_score() -> None:
    text = updated(TEXT, Row(module="replay/rules.py", mutants=106, caught=100))
    assert text == TEXT


def test_new_counts_leave_the_judgement_to_make() -> None:
    text = updated(TEXT, Row(module="replay/rules.py", mutants=110, caught=101))
    assert (
        _row(text, "replay/rules.py")
        == f"| `replay/rules.py` | whole | 110 | 101 | 91.8% | {TO_JUDGE} |"
    )
    assert text.endswith("After the table.\n")


def test_every_mutant_caught_needs_no_judgement() -> None:
    text = updated(TEXT, Row(module="replay/rules.py", mutants=110, caught=110))
    assert _row(text, "replay/rules.py").endswith("| 100.0% | **100.0%** |")


def test_a_new_module_gets_a_row_in_its_package() -> None:
    text = updated(TEXT, Row(module="records/varint.py", mutants=52, caught=50))
    modules = [line.split("`")[1] for line in text.splitlines() if line.startswith("| `")]
    assert modules == ["records/codec.py", "records/varint.py", "replay/rules.py"]


def test_a_file_without_the_table_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "README.md"
    table.write_text("# no table\n")
    with pytest.raises(ValueError, match="no score table"):
        record(Row(module="records/codec.py", mutants=1, caught=1), table)
    assert table.read_text() == "# no table\n"


def test_the_runners_table_is_the_readme_beside_it() -> None:
    assert TABLE.name == "README.md" and HEADER in TABLE.read_text()
