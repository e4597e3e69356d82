"""docs/prometheus-rules.yml: what docs/operating.md says it holds, valid and right by promtool.

The "What to alert on" table and the rules file name the same alerts with the same expressions
and `for` durations; `promtool check rules` accepts the file, and `promtool test rules` runs
tests/data/prometheus-rules-test.yml (each alert firing after its `for` on its failure, silent
on a healthy quorum and on the look-alikes). The rules evaluated against a real quorum:
tests/system/test_prometheus_dashboard.py.
"""

from __future__ import annotations

import re

from tests.support.paths import REPO
from tests.support.prometheus import RULES, RULES_TEST, promtool, rules_in_file

OPERATING = REPO / "docs" / "operating.md"
NO_WAIT = "at once"
"""The table's `for` of an alert that fires at its first evaluation."""


def documented_alerts() -> dict[str, tuple[str, str]]:
    """{alert: (expression, for)} of operating.md's "What to alert on" table."""
    text = OPERATING.read_text()
    section = text[text.index("## What to alert on") :]
    section = section[: section.index("\n## ", 1)]
    found = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        name, expr, wait = cells[0].strip("`"), cells[1].strip("`"), cells[2]
        found[name] = (expr.replace("\\|", "|"), "" if wait == NO_WAIT else wait)
    return found


def test_the_docs_table_and_the_rules_file_name_the_same_alerts() -> None:
    documented = documented_alerts()
    shipped = rules_in_file(RULES)
    assert list(documented) == list(shipped)
    for name, (expr, wait) in shipped.items():
        assert documented[name] == (expr, wait), name


def test_the_followers_behind_alert_is_shipped() -> None:
    expr, wait = rules_in_file(RULES)["MlogFollowersBehind"]
    assert "mlog_controller_last_applied_record_offset" in expr and wait == "5m"


def test_the_archive_alerts_are_shipped() -> None:
    """On the metrics every node exports with an archive (tests/system/test_archive_quorum.py
    scrapes them from real servers through an outage)."""
    rules = rules_in_file(RULES)
    assert rules["MlogArchiveUnreachable"] == ("mlog_archive_failing == 1", "10m")
    assert rules["MlogArchiveBehind"] == ("mlog_archive_behind_segments > 2", "30m")


def test_promtool_accepts_the_rules_file() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules_in_file(RULES))} rules found" in checked.stdout


def test_the_alerts_fire_on_their_failures_and_only_then() -> None:
    tested = promtool("test", "rules", str(RULES_TEST))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    text = RULES_TEST.read_text()
    silent = set(re.findall(r"alertname: (\w+), exp_alerts: \[\]", text))
    firing = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts:\n\s+- exp_labels", text))
    assert silent == firing == set(rules_in_file(RULES)), "each alert tested firing and silent"
