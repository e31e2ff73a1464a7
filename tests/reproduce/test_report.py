"""A shared-protocol report: the settings record what ran, the margin the verdicts used, the files written."""

import json
from types import SimpleNamespace

from codesign.reproduce.replication import BEGIN, END
from codesign.reproduce.report import PaperClaim, ReadmeRow, Target, ran_settings, report_margin, write_report
from codesign.reproduce.summary import summarize


def test_settings_record_the_validation_fraction_that_ran():
    settings = {"data": {"name": "digits", "validation_fraction": 0.0}, "arms": [{"data": {"validation_fraction": 0.0}}]}
    ran = [SimpleNamespace(name="a", validation_fraction=0.2), SimpleNamespace(name="b", validation_fraction=0.2)]
    assert ran_settings(settings, ran) == {"data": {"name": "digits", "validation_fraction": 0.2},
                                           "arms": [{"data": {"validation_fraction": 0.2}}], "validation_fraction": 0.2}
    mixed = [SimpleNamespace(name="a", validation_fraction=0.2), SimpleNamespace(name="b", validation_fraction=0.1)]
    assert ran_settings(settings, mixed)["validation_fraction"] == {"a": 0.2, "b": 0.1}
    assert ran_settings(settings, [SimpleNamespace(name="a", validation_fraction=None)]) == settings


def test_the_report_holds_the_study_and_writes_table_and_plot(study, tmp_path):
    _, arms, runs, tuning = study
    summaries = summarize(arms, runs, tuning, margin_pt={"fixed": 5.0})
    assert report_margin(summaries) == 5.0 and report_margin(summarize(arms, runs, tuning)) is None
    row = ReadmeRow(reproduction="`x` (tiny)", target="t", measured="m", verdict="met")
    payload = write_report(tmp_path, name="x", title="X", summaries=summaries, seeds=[0, 1, 2], settings={},
                           claim=PaperClaim(text="claim", citation="here"), tuning=tuning, readme=row,
                           targets=[Target(text="t", met=True, measured="m")])
    assert json.loads((tmp_path / "results.json").read_text()) == json.loads(json.dumps(payload))
    assert payload["all_targets_met"] and payload["readme"]["verdict"] == "met"
    assert payload["protocol"]["split_seeds"] == [0, 1, 2] and payload["protocol"]["equivalence_margin_pt"] == 5.0
    table = (tmp_path / "table.md").read_text()
    assert "| fixed |" in table and "## Tuning" in table and "±5 pt" in table
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the restated section: the claim over runs (as judged) and over the three seed means, in both files
    restated = payload["replication"]
    assert [c["arm"] for c in restated["claims"]] == ["fixed"] and restated["claims"][0]["margin_pt"] == 5.0
    assert restated["claims"][0]["runs"]["tost"] == payload["arms"][1]["accuracy_tost"]
    assert restated["claims"][0]["seeds"]["n"] == 3 and restated["claims"][0]["relative"] is None
    assert [e["arm"] for e in restated["energy"]] == ["fixed"] and "recorded per run" in restated["energy"][0][
        "every_test_source"]
    assert table.rstrip("\n").endswith(END) and table.count(BEGIN) == 1
