"""The dashboard's renderings: the Markdown codesign's reports use becomes HTML (headings, tables, lists, code,
paragraphs, inline code and links, everything escaped), and a JSON report a pretty-printed page."""

from __future__ import annotations

import json

from codesign.dashboard import remove_renderings, render_markdown, render_report


def test_markdown_reports_render_to_html_with_everything_escaped():
    text = ("# Fit of <design>\n\nA paragraph with `code`, **bold** and [a link](fit.md)\ncontinued.\n\n"
            "| IP | LUT |\n|---|---:|\n| gemm | 20 <b> |\n\n- one\n- two\n\n```sh\ncodesign build x < y\n```\n")
    page = render_markdown(text)
    assert "<h1>Fit of &lt;design&gt;</h1>" in page
    assert "<p>A paragraph with <code>code</code>, <b>bold</b> and <a href='fit.md'>a link</a> continued.</p>" in page
    assert "<table><tr><th>IP</th><th>LUT</th></tr><tr><td>gemm</td><td>20 &lt;b&gt;</td></tr></table>" in page
    assert "<ul><li>one</li><li>two</li></ul>" in page and "<pre>codesign build x &lt; y</pre>" in page


def test_a_json_report_becomes_a_pretty_printed_page_linking_its_raw_file(tmp_path):
    report = tmp_path / "fit.json"
    report.write_text(json.dumps({"fits": True, "percent": {"lut": 39.8}}))
    page = render_report(report).read_text()
    assert (tmp_path / "fit.json.html").is_file() and "href='fit.json'" in page
    assert "&quot;fits&quot;: true" in page and "&quot;lut&quot;: 39.8" in page
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert "{not json" in render_report(broken).read_text()


def test_a_demo_run_again_removes_the_pages_it_rendered_and_nothing_else(tmp_path):
    """make demo twice into one folder: the second run finds the build folders as codesign build wrote them."""
    build = tmp_path / "build" / "kv260"
    build.mkdir(parents=True)
    for name in ("fit.json", "fit.md", "README.md"):
        (build / name).write_text("{}" if name.endswith(".json") else "# x\n")
        render_report(build / name)
    (build / "notes.html").write_text("a user's page")  # no report beside it
    (tmp_path / "index.html").write_text("the index")
    assert remove_renderings(tmp_path) == 3
    assert sorted(p.name for p in build.iterdir()) == ["README.md", "fit.json", "fit.md", "notes.html"]
    assert (tmp_path / "index.html").is_file() and remove_renderings(tmp_path) == 0
