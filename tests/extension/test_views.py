"""Every view of a `%%tensorop` cell in a real browser, in JupyterLab's light and dark themes.

Runs `tests/extension/views.ipynb` (a profiled softmax on cpu, cuda and ascend, and a cell with a misspelt name)
in JupyterLab with headless Chromium, then, in each theme, opens every tab of the operator's widget and fails on:
an element wider than its panel or a scrollbar inside the output (`OVERFLOW_JS`), a number broken across lines
(`BROKEN_JS`), text as dark as the page in the dark theme, and roofline labels that overlap (the SVG's label
groups, for every target of the picker). Side by side: selecting a loop-IR statement highlights its lines in every
backend. Screenshots of each tab and theme go to test-output/views-*.png.
"""
from __future__ import annotations

import re
from pathlib import Path

import playwright.sync_api as playwright_sync
import pytest

from .lab import CHROMIUM, CHROMIUM_ARGS, LabServer

REPO = Path(__file__).resolve().parents[2]
OUTPUT = REPO / "test-output"
NOTEBOOK = REPO / "tests/extension/views.ipynb"
TIMEOUT_MS = 90_000
THEMES = ("JupyterLab Light", "JupyterLab Dark")

# Elements inside `root` that stick out of it, or scroll (a scrollbar inside the notebook's own), or cut their
# content off (overflow hidden with more content than room).
OVERFLOW_JS = """root => {
  const box = root.getBoundingClientRect();
  const name = el => el.tagName.toLowerCase() + (el.className && typeof el.className === 'string'
      ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const bad = [];
  for (const el of [root, ...root.querySelectorAll('*')]) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.right > box.right + 1 || r.left < box.left - 1) bad.push(`${name(el)} sticks out: ${r.left}-${r.right} of ${box.left}-${box.right}`);
    const cs = getComputedStyle(el);
    for (const [ax, size, client] of [['X', el.scrollWidth, el.clientWidth], ['Y', el.scrollHeight, el.clientHeight]]) {
      const o = cs['overflow' + ax];
      if (size > client + 1 && (o === 'auto' || o === 'scroll')) bad.push(`${name(el)} scrolls ${ax}: ${size} > ${client}`);
      if (size > client + 1 && o === 'hidden' && el.tagName !== 'svg' && !el.closest('svg')) bad.push(`${name(el)} cuts ${ax}: ${size} > ${client}`);
    }
  }
  return bad;
}"""

# Table cells that hold a number (any cell but a note) laid out on more than one line.
BROKEN_JS = """root => {
  const bad = [];
  for (const td of root.querySelectorAll('table.xb-table td:not(.xb-note), table.xb-metrics td.xb-num')) {
    if (!td.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(td.querySelector('.xb-per') ? td.firstChild : td);
    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    if (tops.size > 1) bad.push(td.textContent.trim());
  }
  return bad;
}"""

# Pairs of roofline labels (the SVG groups matplotlib writes for them) whose boxes intersect.
LABELS_JS = """root => {
  const boxes = [...root.querySelectorAll('svg g[id^="label:"]')].map(g => [g.id, g.getBoundingClientRect()])
      .filter(([, r]) => r.width > 0);
  const bad = [];
  for (let i = 0; i < boxes.length; i++) for (let j = 0; j < i; j++) {
    const [a, ra] = boxes[i], [b, rb] = boxes[j];
    if (ra.left < rb.right - 0.5 && rb.left < ra.right - 0.5 && ra.top < rb.bottom - 0.5 && rb.top < ra.bottom - 0.5)
      bad.push(`${a} / ${b}`);
  }
  return [boxes.length, bad];
}"""

# The luminance of an element's text colour and of the page behind it (0 black .. 1 white).
CONTRAST_JS = """el => {
  const lum = c => { const m = c.match(/[\\d.]+/g).map(Number); return (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255; };
  let bg = null, e = el;
  while (e && !bg) { const c = getComputedStyle(e).backgroundColor; if (!/rgba\\(0, 0, 0, 0\\)|transparent/.test(c)) bg = c; e = e.parentElement; }
  return [lum(getComputedStyle(el).color), lum(bg || 'rgb(255, 255, 255)')];
}"""


@pytest.fixture
def lab(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    (root / NOTEBOOK.name).write_text(NOTEBOOK.read_text())
    server = LabServer(root, tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        print(f"JupyterLab log ({server.log_path}):\n{server.log()[-3000:]}")


def _set_theme(page: playwright_sync.Page, theme: str) -> None:
    page.click(".lm-MenuBar-item:has-text('Settings')")
    page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(r"^Theme$")).hover()
    page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(f"^{theme}$")).click()
    want = "true" if theme.endswith("Dark") else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{'false' if want == 'true' else 'true'}'")


STARTED_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')]
    .some(p => /\\[[\\d*]+\\]/.test(p.textContent))"""


def _run_all(page: playwright_sync.Page) -> None:
    """Run All Cells from the menu once the kernel is there (answering JupyterLab's kernel question if it asks)."""
    for _ in range(3):
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']")
        page.wait_for_timeout(1500)
        dialog = page.locator(".jp-Dialog:has-text('Select Kernel')")
        if dialog.count():
            dialog.locator("button.jp-mod-accept").click()
            continue
        page.click(".lm-MenuBar-item:has-text('Run')")
        page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(r"^Run All Cells$")).click()
        try:
            page.wait_for_function(STARTED_JS, timeout=20_000)
            return
        except playwright_sync.TimeoutError:
            continue
    raise AssertionError("the notebook's cells never started running")


def _check(page, locator, what: str, problems: list[str]) -> None:
    for js, kind in ((OVERFLOW_JS, "overflow"), (BROKEN_JS, "number broken across lines")):
        for p in locator.evaluate(js):
            problems.append(f"{what}: {kind}: {p}")


@pytest.mark.timeout(600)
def test_every_tab_in_light_and_dark(lab: LabServer) -> None:
    OUTPUT.mkdir(exist_ok=True)
    problems: list[str] = []
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(lab.url)
                       or route.request.url.startswith("data:") else route.abort())
            page.goto(f"{lab.url}/lab/tree/{NOTEBOOK.name}?token={lab.token}")
            _run_all(page)
            page.wait_for_function(
                """() => {
                    const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')];
                    return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
                }""", timeout=TIMEOUT_MS * 3)
            _drive(page, problems)
        except Exception:
            page.screenshot(path=str(OUTPUT / "views-failure.png"))
            raise
        finally:
            browser.close()
    (OUTPUT / "views-problems.txt").write_text("\n".join(problems))
    assert not problems, "\n".join(problems[:40]) + (f"\n... ({len(problems)} in all)" if len(problems) > 40 else "")


def _drive(page: playwright_sync.Page, problems: list[str]) -> None:
    cells = page.locator(".jp-NotebookPanel .jp-CodeCell")
    widget = cells.nth(1).locator(".xb-operator")
    playwright_sync.expect(widget).to_be_visible()
    # the progress of the cell is gone once it is done; its view stayed
    assert cells.nth(1).locator(".xb-progress").count() == 0
    # the misspelt name: the short message with the close match, the traceback collapsed, from the user's frame
    err = cells.nth(2).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    playwright_sync.expect(err).to_contain_text("hint: did you mean xb.tanh?")
    accordion = cells.nth(2).locator(".widget-accordion, .jupyter-widget-Accordion, .lm-Accordion").first
    playwright_sync.expect(accordion).to_contain_text("Traceback (from your code)")
    # %xbench: the session tables in the views' style, not the page's (right-aligned, striped) one
    session = cells.nth(3).locator("table.xb-table td").first
    playwright_sync.expect(session).to_be_visible()
    assert session.evaluate("el => getComputedStyle(el).textAlign") in ("left", "start")
    _check(page, cells.nth(3).locator(".jp-OutputArea-output").last, "session", problems)
    tabs = widget.locator(".lm-TabBar-tab")
    titles = tabs.all_inner_texts()
    assert titles == ["Summary", "IR", "CPU", "CUDA", "PTX", "Ascend C", "Side by side", "Resources", "Metrics",
                      "Roofline"], titles
    output = cells.nth(1).locator(".jp-OutputArea-output").last
    for theme in THEMES:
        _set_theme(page, theme)
        dark = theme.endswith("Dark")
        for i, title in enumerate(titles):
            tabs.nth(i).click()
            panel = widget.locator(".widget-tab-contents > .lm-Widget:not(.lm-mod-hidden), "
                                   ".jupyter-widget-tab-contents > .lm-Widget:not(.lm-mod-hidden)").first
            playwright_sync.expect(panel).to_be_visible()
            what = f"{theme} / {title}"
            _check(page, output, what, problems)
            if dark:
                text = panel.locator(".xb-view").first
                if text.count():
                    fg, bg = text.evaluate(CONTRAST_JS)
                    if abs(fg - bg) < 0.4:
                        problems.append(f"{what}: text luminance {fg:.2f} on {bg:.2f}")
            if title == "Side by side":
                _side_by_side(panel, what, problems)
            if title == "Roofline":
                _roofline(panel, what, problems)
            page.screenshot(path=str(OUTPUT / f"views-{'dark' if dark else 'light'}-{i:02d}-"
                                                f"{title.lower().replace(' ', '-')}.png"), full_page=False)


def _side_by_side(panel, what: str, problems: list[str]) -> None:
    stmts = panel.locator("label.xb-stmt")
    assert stmts.count() >= 4, f"{what}: {stmts.count()} statements"
    stmt = stmts.nth(2)                     # the row's exponentials: exp on every backend
    sid = stmt.get_attribute("data-sid")
    stmt.click()
    for backend in ("cpu", "cuda", "ascend"):
        col = panel.locator(f".xb-col[data-backend='{backend}']")
        lines = col.locator(f".xb-m-{sid}")
        if lines.count() == 0:
            problems.append(f"{what}: statement {sid} maps to no {backend} line")
            continue
        bg = lines.first.evaluate("el => getComputedStyle(el).backgroundColor")
        if bg in ("rgba(0, 0, 0, 0)", "transparent"):
            problems.append(f"{what}: selecting {sid} does not highlight its {backend} lines")
        other = col.locator(".xb-line:not(.xb-m-" + sid + ")").first
        if other.evaluate("el => getComputedStyle(el).backgroundColor") == bg:
            problems.append(f"{what}: {backend} lines of other statements are highlighted too")


def _roofline(panel, what: str, problems: list[str]) -> None:
    buttons = panel.locator(".widget-toggle-buttons button, .jupyter-widget-toggle-buttons button")
    names = buttons.all_inner_texts()
    assert names[0] == "all targets" and "h100" in names, names
    for i, name in enumerate(names):
        buttons.nth(i).click()
        chart = panel.locator(".xb-roofline svg")
        playwright_sync.expect(chart).to_be_visible()
        if i:
            panel.page.wait_for_function("n => document.querySelector('.xb-roofline svg')?.innerHTML.includes(n)",
                                         arg=f"on {name}")
        count, bad = panel.evaluate(LABELS_JS)
        if count < 3:
            problems.append(f"{what} / {name}: {count} labels found")
        for pair in bad:
            problems.append(f"{what} / {name}: labels overlap: {pair}")
        titles = chart.locator("title").evaluate_all("els => els.map(e => e.textContent)")
        if not any("time" in t for t in titles):
            problems.append(f"{what} / {name}: no values on hover")
    buttons.nth(0).click()



