"""The demo's dashboard: ``index.html`` that opens on the results, and every report rendered as a page of its own.

The page starts with what a person came for: the verdict, the training curve with the golden loop beside it, every
PE's verification per level, each board's fit against its budget (the plot carries the limit line) and the
explorer's front where one was written. Then the stages with their times, then every report and plot by section,
in the flow's order (training, verification, cost, build). Plots are shown at full width; ``.md`` and ``.json``
reports are rendered to HTML beside themselves (``<name>.md.html``), the raw file linked from the rendering.
Standard library only; the browser check is ``tests/test_demo_index.py``.
"""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path
from typing import Iterable, Sequence
from urllib.parse import quote

from codesign.io.reports import write_text_atomic

INDEX = "index.html"
RENDERED = (".md", ".json")  # reports rendered to <name>.html
SECTION_ORDER = ("summary", "training", "build", "explore")  # then the PEs, alphabetically

STYLE = ("body{font-family:sans-serif;margin:2em auto;max-width:1200px;color:#222;background:#fff;padding:0 1em}"
         "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:3px 8px;text-align:left}"
         ".num{text-align:right}.ok{color:#176317}.FAIL,.error{color:#b00020;font-weight:bold}"
         ".verdict{font-size:1.3em;font-weight:bold}img.full{width:100%;border:1px solid #ccc;margin:6px 0}"
         "h2{border-bottom:2px solid #4a7ab5}pre{background:#f6f6f6;padding:8px;overflow-x:auto}"
         ".results{background:#f4f8fc;border:1px solid #c9d9ec;padding:.5em 1em;margin:1em 0}"
         ".boards{display:flex;flex-wrap:wrap;gap:1%}.boards>div{flex:1 1 32%;min-width:300px}")
CHECK_PLOTS = ("window.addEventListener('load',function(){var all=document.images,bad=0;"
               "for(var i=0;i<all.length;i++){if(!all[i].complete||all[i].naturalWidth===0)bad++;}"
               "document.body.setAttribute('data-plots-loaded',(all.length-bad)+'/'+all.length);"
               "if(bad){var p=document.createElement('p');p.className='FAIL';"
               "p.textContent=bad+' of '+all.length+' plots did not load';"
               "document.body.insertBefore(p,document.body.firstChild);}});")


def _page(title: str, body: Iterable[str], script: str = "") -> str:
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n" + "\n".join(body)
            + (f"\n<script>{script}</script>" if script else "") + "\n</body></html>\n")


def _inline(text: str) -> str:
    """Escaped text with `code`, **bold** and [links](target) of Markdown."""
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)
    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", lambda m: f"<a href='{html.escape(m.group(2))}'>{m.group(1)}</a>",
                  text)


def _table(rows: list[str]) -> str:
    cells = [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows]
    head, body = cells[0], [row for row in cells[1:] if not all(set(c) <= set(":- ") for c in row)]
    return ("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body)
            + "</table>")


def render_markdown(text: str) -> str:
    """The Markdown codesign's reports use, as HTML: headings, tables, lists, fenced code, paragraphs."""
    out, lines, index = [], text.splitlines(), 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            end = next((k for k in range(index + 1, len(lines)) if lines[k].startswith("```")), len(lines))
            out.append("<pre>" + html.escape("\n".join(lines[index + 1:end])) + "</pre>")
            index = end + 1
        elif line.startswith("|"):
            end = next((k for k in range(index, len(lines)) if not lines[k].startswith("|")), len(lines))
            out.append(_table(lines[index:end]))
            index = end
        elif re.match(r"^#{1,6} ", line):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
            index += 1
        elif re.match(r"^\s*[-*] ", line):
            end = next((k for k in range(index, len(lines)) if not re.match(r"^\s*[-*] ", lines[k])), len(lines))
            out.append("<ul>" + "".join(f"<li>{_inline(item.strip()[2:])}</li>" for item in lines[index:end]) + "</ul>")
            index = end
        elif line.strip():
            end = next((k for k in range(index, len(lines)) if not lines[k].strip() or lines[k].startswith(("|", "#",
                                                                                                             "```"))),
                       len(lines))
            out.append("<p>" + _inline(" ".join(lines[index:end])) + "</p>")
            index = end
        else:
            index += 1
    return "\n".join(out)


def render_report(path: Path) -> Path:
    """``<path>.html``: the Markdown rendered, or the JSON pretty-printed, with a link to the raw file."""
    path = Path(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":
        try:
            body = "<pre>" + html.escape(json.dumps(json.loads(text), indent=2, sort_keys=True)) + "</pre>"
        except ValueError:
            body = "<pre>" + html.escape(text) + "</pre>"
    else:
        body = render_markdown(text)
    raw = f"<p>Raw file: <a href='{quote(path.name)}'>{html.escape(path.name)}</a></p>"
    return write_text_atomic(path.with_name(path.name + ".html"), _page(path.name, [raw, body]))


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _img(out: Path, relative: Path) -> str:
    link = quote(relative.as_posix())
    return f"<a href='{link}'><img class='full' src='{link}' alt='{html.escape(relative.as_posix())}'></a>"


def results_block(out: Path) -> tuple[list[str], set[Path]]:
    """The results the page opens on (training, verification per level, fit per board, the explorer's front) and
    the plots it shows (not shown twice below)."""
    body, shown = ["<div class='results'><h2>Results</h2>"], set()
    training = _load(out / "training" / "training.json")
    if training:
        board, golden = training["history"][-1], training["golden_history"][-1]
        words = training["state_words"]
        body.append(f"<h3>Training: {html.escape(training['design'])} on the {html.escape(training['board'])}</h3>"
                    f"<p>Test accuracy after {training['epochs']} epochs: <b>{100 * board['accuracy']:.1f} %</b> "
                    f"on the emulated board, {100 * golden['accuracy']:.1f} % in the golden loop; "
                    f"{words['differ']} of {words['compared']:,} state words differ.</p>")
        if (out / "training" / "training.png").is_file():
            body.append(_img(out, Path("training/training.png")))
            shown.add(Path("training/training.png"))
    reports = sorted(out.glob("*/verify/verify.json"))
    if reports:
        body.append("<h3>Verification: golden ≡ C-sim ≡ RTL, bit for bit</h3><table><tr><th>PE</th><th>level</th>"
                    "<th class='num'>vectors</th><th class='num'>mismatches</th></tr>")
        for path in reports:
            report = _load(path) or {}
            for row in report.get("results", []):
                status = "ok" if row.get("mismatches") == 0 else "FAIL"
                body.append(f"<tr><td>{html.escape(str(report.get('pe')))}</td><td>{html.escape(str(row.get('level')))}"
                            f"</td><td class='num'>{row.get('vectors', 0):,}</td><td class='num {status}'>"
                            f"{row.get('mismatches')}</td></tr>")
        body.append("</table>")
    fits = sorted(out.glob("build/*/fit.json"))
    if fits:
        body.append("<h3>Fit against each board's budget</h3><div class='boards'>")
    for fit in fits:
        report = _load(fit) or {}
        percent = report.get("percent", {})
        figures = ", ".join(f"{key.upper()} {value:.1f} %" for key, value in percent.items())
        body.append(f"<div><p><b>{html.escape(fit.parent.name)}: {'fits' if report.get('fits') else 'does not fit'}"
                    f"</b> (limit {report.get('limit_percent', 90):g} %): {html.escape(figures)}</p>")
        if (fit.parent / "fit.png").is_file():
            body.append(_img(out, (fit.parent / "fit.png").relative_to(out)))
            shown.add((fit.parent / "fit.png").relative_to(out))
        body.append("</div>")
    if fits:
        body.append("</div>")
    for front in sorted(out.glob("explore*/*pareto*.png")):
        body.append(f"<h3>Explorer's front: {html.escape(front.parent.name)}</h3>" + _img(out, front.relative_to(out)))
        shown.add(front.relative_to(out))
    body.append("</div>")
    return (body, shown) if len(body) > 2 else ([], set())


def _section(relative: Path) -> str:
    parts = relative.parts
    if len(parts) == 1:
        return "summary"
    if parts[0] == "build" and len(parts) > 2:
        return f"build/{parts[1]}"
    return parts[0]


def _order(name: str) -> tuple:
    head = name.split("/")[0]
    return (SECTION_ORDER.index(head) if head in SECTION_ORDER else len(SECTION_ORDER), name)


def write_dashboard(out: Path, stages: Sequence, files: Sequence[Path], *, title: str, total_seconds: float,
                    machine: str = "") -> Path:
    """``out/index.html`` over ``files`` (reports, plots and extra files, relative to ``out``): the results, the
    stages (objects with ``name``, ``status``, ``seconds``, ``detail``), then every file by section; ``.md`` and
    ``.json`` reports rendered to pages of their own first. Links are relative (the folder can be moved)."""
    out = Path(out)
    sections: dict[str, list[Path]] = {}
    for relative in files:
        sections.setdefault(_section(relative), []).append(relative)
    passed = all(stage.status == "ok" for stage in stages)
    results, shown = results_block(out)
    rows = "\n".join(f"<tr><td>{i}</td><td>{html.escape(s.name)}</td><td class='{s.status}'>{s.status}</td>"
                     f"<td class='num'>{s.seconds:.1f}</td><td>{html.escape(s.detail)}</td></tr>"
                     for i, s in enumerate(stages, 1))
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<p class='verdict {'ok' if passed else 'FAIL'}'>{'PASS' if passed else 'FAIL'}: {len(stages)} stages in "
            f"{total_seconds:.0f} s, written {time.strftime('%Y-%m-%d %H:%M')}</p>",
            f"<p>{html.escape(machine)}</p>" if machine else "", *results,
            "<h2>Stages</h2><table><tr><th>#</th><th>stage</th><th>status</th><th>time (s)</th><th>detail</th></tr>",
            rows, f"<tr><td></td><th>total</th><td></td><td class='num'>{total_seconds:.1f}</td><td></td></tr></table>"]
    for name in sorted(sections, key=_order):
        body.append(f"<h2>{html.escape(name)}</h2><ul>")
        for relative in sections[name]:
            target = relative
            if relative.suffix in RENDERED:
                target = render_report(out / relative).relative_to(out)
            body.append(f"<li><a href='{quote(target.as_posix())}'>{html.escape(relative.as_posix())}</a></li>")
        body.append("</ul>")
        body += [_img(out, relative) for relative in sections[name] if relative.suffix == ".png"
                 and relative not in shown]
    return write_text_atomic(out / INDEX, _page(title, body, CHECK_PLOTS))


def remove_renderings(out: Path) -> int:
    """Delete the pages :func:`render_report` wrote under ``out`` (``<report>.md.html``, ``<report>.json.html``
    beside their reports), so that a demo run again into the same folder finds each build folder as ``codesign
    build`` left it (which refuses to write among files it does not write); returns how many."""
    removed = 0
    for page in sorted(Path(out).rglob("*.html")):
        report = page.with_suffix("")  # <report>.html -> <report>
        if report.suffix in RENDERED and report.is_file():
            page.unlink()
            removed += 1
    return removed


__all__ = ["INDEX", "remove_renderings", "render_markdown", "render_report", "results_block", "write_dashboard"]
