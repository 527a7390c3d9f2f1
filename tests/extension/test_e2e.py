"""End to end: JupyterLab with the installed @xbench/lab extension, driven by headless Chromium.

Opens a notebook, runs all its cells from the Run menu, and checks the xbench panel against the kernel's
own registry (read through a second kernel client): every operator listed, one chip per backend with the
kernel's status, "predicted" where so. Then opens an operator's sources, switches to the Ascend C tab and
compares the editor text with the source the kernel holds. Screenshots go to test-output/.

The notebook is a parameter: `tests/extension/e2e.ipynb` publishes a record by hand (it pins the panel's
formatting), `notebooks/01-quickstart.ipynb` compiles its operators with `%%tensorop` on cpu, cuda and ascend.
A notebook may show errors only in cells tagged `raises-exception` (the quickstart shows one on purpose).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

import playwright.sync_api as playwright_sync
import pytest

from .lab import CHROMIUM, CHROMIUM_ARGS, LabServer, evaluate

REPO = Path(__file__).resolve().parents[2]
OUTPUT = REPO / "test-output"
TIMEOUT_MS = 90_000
playwright_sync.expect.set_options(timeout=TIMEOUT_MS)


@dataclass
class Case:
    notebook: Path
    # operator -> backends the notebook is known to publish; the panel is checked against the kernel's
    # registry in any case, this only guards against a notebook that publishes nothing.
    expected: dict[str, set[str]] = field(default_factory=dict)


CASES = [
    Case(REPO / "tests/extension/e2e.ipynb", {"softmax": {"cpu", "cuda", "ascend"}}),
    Case(REPO / "notebooks/01-quickstart.ipynb", {"softmax": {"cpu", "cuda", "ascend"},
                                                  "rmsnorm": {"cpu", "cuda", "ascend"}, "relu": {"cpu"}}),
]


def _expected_errors(notebook: Path) -> int:
    cells = json.loads(notebook.read_text())["cells"]
    return sum("raises-exception" in c.get("metadata", {}).get("tags", []) for c in cells)


@pytest.fixture
def lab(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LabServer]:
    case: Case = request.param
    root = tmp_path / "root"
    root.mkdir()
    # The browser runs the notebook from a clean slate: a stored notebook (the tutorials keep their outputs)
    # is copied without outputs, execution counts or saved widget state.
    nb = json.loads(case.notebook.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["metadata"].pop("widgets", None)
    (root / case.notebook.name).write_text(json.dumps(nb, indent=1))
    server = LabServer(root, tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        print(f"JupyterLab log ({server.log_path}):\n{server.log()[-4000:]}")


def _no_network(route: playwright_sync.Route) -> None:
    host = urlsplit(route.request.url).hostname
    if host in ("127.0.0.1", "localhost") or route.request.url.startswith("data:"):
        route.continue_()
    else:
        route.abort()


DOC_TEXT = "el => el.cmView.view.state.doc.toString()"


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("lab", CASES, ids=[c.notebook.name for c in CASES], indirect=True)
def test_panel_lists_operators_and_shows_sources(lab: LabServer, request: pytest.FixtureRequest) -> None:
    case: Case = request.node.callspec.params["lab"]
    name = case.notebook.name
    OUTPUT.mkdir(exist_ok=True)
    shot = OUTPUT / f"e2e-{case.notebook.stem}"
    console: list[str] = []

    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.route("**/*", _no_network)
            try:
                _drive(page, lab, case, name, shot)
            except Exception:
                page.screenshot(path=f"{shot}-failure.png")
                print("browser console:\n" + "\n".join(console[-80:]))
                raise
        finally:
            browser.close()


def _drive(page: playwright_sync.Page, lab: LabServer, case: Case, name: str, shot: Path) -> None:
    page.goto(f"{lab.url}/lab/tree/{quote(name)}?token={lab.token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']")

    # Before anything ran, the panel says xbench is not loaded in this kernel.
    page.click(".jp-SideBar.jp-mod-right .lm-TabBar-tab[data-id='xbench-sidebar']")
    sidebar = page.locator("#xbench-sidebar")
    playwright_sync.expect(sidebar.locator(".xb-Sidebar-empty")).to_contain_text("has not loaded xbench")

    # Run all cells from the menu, as a person would.
    page.click(".lm-MenuBar-item:has-text('Run')")
    page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(r"^Run All Cells$")).click()
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=TIMEOUT_MS * 4,
    )
    # JupyterLab draws an error like stderr: a notebook may show those only for the cells tagged raises-exception
    # (the quickstart's names the cell line instead of printing a traceback), and no other stderr.
    shown = page.locator(".jp-NotebookPanel .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert shown.count() == _expected_errors(case.notebook), "error or stderr output: " + " | ".join(
        shown.all_inner_texts())
    if case.notebook.name == "01-quickstart.ipynb":
        message = shown.first.inner_text()
        assert message.startswith("xbench: cell line 3: operator relu:"), message
        assert "Traceback" not in message
        # each %%tensorop output is the xbench widget, rendered by the widget manager (not its text fallback)
        tabs = page.locator(".jp-NotebookPanel .jp-OutputArea-output .widget-tab")
        playwright_sync.expect(tabs.first.locator(".lm-TabBar-tab").first).to_have_text("Summary")
        assert tabs.count() == 3
        page.screenshot(path=f"{shot}-widget.png")

    client = lab.kernel_client(name)
    try:
        last_error = evaluate(client, "type(getattr(__import__('sys'), 'last_value', None)).__name__")
        assert last_error == ("CellError" if _expected_errors(case.notebook) else "NoneType")
        snapshot = evaluate(client, "__import__('xbench.notebook.registry', fromlist=['registry'])"
                                    ".registry().snapshot()")
        assert snapshot, f"{name} published no operator"
        kernel_backends = {op["name"]: set(op["backends"]) for op in snapshot}
        for op_name, backends in case.expected.items():
            assert kernel_backends.get(op_name) == backends

        # The panel lists every operator of the kernel, with the kernel's statuses.
        for op in snapshot:
            item = sidebar.locator(f".xb-Operator[data-operator='{op['name']}']")
            playwright_sync.expect(item).to_be_visible()
            playwright_sync.expect(item.locator(".xb-Operator-signature")).to_have_text(op["signature"])
            for backend, result in op["backends"].items():
                chip = item.locator(f".xb-Chip[data-backend='{backend}']")
                playwright_sync.expect(chip).to_have_attribute("data-status", result["status"])
                if result["predicted"]:
                    playwright_sync.expect(chip).to_contain_text("predicted")
                else:
                    playwright_sync.expect(chip).not_to_contain_text("predicted")
        first = snapshot[0]
        item = sidebar.locator(f".xb-Operator[data-operator='{first['name']}']")
        if first["best"]:
            playwright_sync.expect(item.locator("[data-metric='best']")).to_contain_text(
                f"on {first['best']['backend']}")
        if case.notebook.name == "e2e.ipynb":
            playwright_sync.expect(item.locator("[data-metric='best']")).to_have_text("1.82 ms on cpu")
            playwright_sync.expect(item.locator("[data-metric='predicted']")).to_have_text(
                "cuda 41.3 µs (h100), ascend 87.1 µs (ascend-910b)")
            playwright_sync.expect(item.locator("[data-metric='registers']")).to_have_text("cuda 32")
            playwright_sync.expect(item.locator("[data-metric='ub']")).to_have_text("ascend 16.0 KiB")
        page.screenshot(path=f"{shot}-panel.png")

        # Open the operator with an Ascend C source, switch to that tab, compare with the kernel's text.
        op = next((o for o in snapshot if "ascend" in o["sources"]), None)
        assert op is not None, f"no operator in {name} has an Ascend C source"
        sidebar.locator(f".xb-Operator[data-operator='{op['name']}'] .xb-Operator-name").click()
        sources = page.locator(".xb-Sources").last
        playwright_sync.expect(sources).to_be_visible()
        tabs = sources.locator(".lm-TabBar-tab")
        labels = {"cpu": "CPU", "cuda": "CUDA", "ptx": "PTX", "ascend": "Ascend C"}
        playwright_sync.expect(tabs).to_have_text([labels[k] for k in op["sources"]])
        sources.locator(".lm-TabBar-tab:has-text('Ascend C')").click()
        editor = sources.locator(".xb-SourceTab[data-kind='ascend'] .cm-content")
        playwright_sync.expect(editor).to_be_visible()
        expected = op["sources"]["ascend"]
        first_line = _lines(expected)[0]
        playwright_sync.expect(editor).to_contain_text(first_line.strip())
        # CodeMirror draws only the lines in view; the whole text is in the editor's state
        shown = editor.evaluate(DOC_TEXT)
        assert _lines(shown) == _lines(expected)
        # Read-only: typing into the editor changes nothing.
        editor.click()
        page.keyboard.type("zzz")
        page.keyboard.press("Enter")
        assert _lines(editor.evaluate(DOC_TEXT)) == _lines(expected)
        playwright_sync.expect(sources.locator(".xb-SourceTab[data-kind='ascend'] .cm-editor")).to_have_class(
            re.compile(r"\bjp-mod-readOnly\b"))
        # C++ highlighting splits lines into styled tokens; PTX is shown as plain text.
        assert editor.locator(".cm-line span").count() > 0
        page.screenshot(path=f"{shot}-ascend.png")
        if "ptx" in op["sources"]:
            sources.locator(".lm-TabBar-tab:has-text('PTX')").click()
            ptx = sources.locator(".xb-SourceTab[data-kind='ptx'] .cm-content")
            playwright_sync.expect(ptx).to_contain_text(_lines(op["sources"]["ptx"])[0].strip())
            assert ptx.locator(".cm-line span").count() == 0

        # Live update: a new operator published from the kernel appears without a reload.
        published = {**op, "name": "xb_e2e_live", "sources": {}}
        published.pop("updated")
        evaluate(client, "__import__('xbench.notebook.registry', fromlist=['registry']).registry()"
                         f".publish(__import__('json').loads({json.dumps(json.dumps(published))}))['name']")
        playwright_sync.expect(sidebar.locator(".xb-Operator[data-operator='xb_e2e_live']")).to_be_visible()
        evaluate(client, "__import__('xbench.notebook.registry', fromlist=['registry']).registry()"
                         ".remove('xb_e2e_live')")
        playwright_sync.expect(sidebar.locator(".xb-Operator[data-operator='xb_e2e_live']")).to_have_count(0)
    finally:
        client.stop_channels()

    # After a reload the panel asks the kernel again and lists the same operators.
    page.reload()
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']")
    if not page.locator("#xbench-sidebar").is_visible():
        page.click(".jp-SideBar.jp-mod-right .lm-TabBar-tab[data-id='xbench-sidebar']")
    for op in snapshot:
        playwright_sync.expect(page.locator(f"#xbench-sidebar .xb-Operator[data-operator='{op['name']}']")
                               ).to_be_visible()

    # A %%tensorop first line is marked in the editor as soon as it is typed.
    page.locator(".jp-NotebookPanel .jp-Cell").last.locator(".jp-InputPrompt").click()
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    page.keyboard.type("%%tensorop --backends cpu\n")
    new_cell = page.locator(".jp-NotebookPanel .jp-Cell.jp-mod-active")   # (long notebooks draw only cells in view)
    playwright_sync.expect(new_cell.locator(".cm-line.xb-tensorop-line")).to_have_count(1)
    playwright_sync.expect(new_cell.locator(".xb-tensorop-badge")).to_have_text("xbench operator")
    page.screenshot(path=f"{shot}-tensorop-line.png")
