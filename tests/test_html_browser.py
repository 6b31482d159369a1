"""The HTML report in a real browser: headless Chromium renders it without errors and draws every node.

Chromium (Debian's ``chromium`` package) is driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: no port is opened).  The page must load with no console error, no
uncaught exception and no network request; screenshots are saved (``MOBILE_EP_SCREENSHOTS=DIR`` keeps
them): the first screen (1600x1000) and the whole page; zoomed out to the whole graph ("fit"), the number of
nodes drawn in each panel must equal the model's.

``tox -e browser`` installs Chromium with apt-get when it is missing and sets ``MOBILE_EP_REQUIRE_BROWSER=1``
so that a missing browser fails there; elsewhere these tests are skipped without one.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import pathlib
import select
import shutil
import subprocess
import time

import pytest

from mepkit import LIGHT_DIR, has_backend
from mobile_ep import pipeline as api
from mobile_ep.reports import html, nodegraph

WIDTH, HEIGHT = 1600, 1000


def chromium_executable() -> str | None:
    explicit = os.environ.get("MOBILE_EP_CHROMIUM")
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


CHROMIUM = chromium_executable()
if CHROMIUM is None and os.environ.get("MOBILE_EP_REQUIRE_BROWSER") != "1":
    pytest.skip("no Chromium found (install Debian's chromium package, set MOBILE_EP_CHROMIUM, or run tox -e browser)",
                allow_module_level=True)


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fds 3 and 4 of the child)."""

    def __init__(self, executable: str, profile: pathlib.Path, log: pathlib.Path) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Park the child's ends above 4 so that moving them onto 3 and 4 cannot clobber each other.
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        for fd in (to_child_r, from_child_w):
            os.close(fd)

        def child_fds() -> None:
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [executable, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--mute-audio", "--hide-scrollbars", f"--user-data-dir={profile}",
                "--remote-debugging-pipe", f"--window-size={WIDTH},{HEIGHT}", "about:blank"]
        self.log = open(log, "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     pass_fds=(3, 4), preexec_fn=child_fds)  # noqa: PLW1509
        os.close(high_r)
        os.close(high_w)
        self.write_fd = to_child_w
        self.read_fd = from_child_r
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self.next_id += 1
        message: dict = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        return self.next_id

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium exited (code {self.proc.poll()})")
                self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        wanted = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        for event in self.events:
            if event["method"] == method:
                return event
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if "method" in message:
                self.events.append(message)
                if message["method"] == method:
                    return message

    def close(self) -> None:
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self.write_fd)
            os.close(self.read_fd)
            self.log.close()


#: What the first screen shows of each panel: where its canvas starts and how many of its pixels, within the
#: window, are painted (not the canvas background), read back from the canvas itself.
_FOLD = """JSON.stringify(mobileEp.panels.filter(function (p) { return !p.root.classList.contains('hidden'); })
  .map(function (p) {
    var r = p.canvas.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
    var bottom = Math.min(r.bottom, window.innerHeight), h = Math.floor((bottom - r.top) * dpr);
    var painted = 0;
    if (h > 0) {
      var px = p.ctx.getImageData(0, 0, p.canvas.width, h).data;
      for (var i = 0; i < px.length; i += 4) if (px[i] !== 250 || px[i + 1] !== 250 || px[i + 2] !== 250) painted++;
    }
    return { top: r.top, visible: Math.max(0, bottom - r.top), painted: painted };
  }))"""


def open_report(report_path: pathlib.Path, screenshot: pathlib.Path, workdir: pathlib.Path, interact=None) -> dict:
    """Load *report_path* in headless Chromium; return the page's stats, its errors and network requests.

    ``"initial"``: each panel's stats as the page opens, ``"fold"`` what the first screen shows of it (and a
    screenshot of that screen beside *screenshot*, ``-fold.png``); ``"stats"``: zoomed out to the whole graph
    (the fit button).  ``interact(evaluate)`` runs after that; what it returns is under ``"interaction"``.
    """
    assert CHROMIUM is not None, "MOBILE_EP_REQUIRE_BROWSER=1 but no Chromium is installed"
    browser = DevTools(CHROMIUM, workdir / "profile", workdir / "chromium.log")
    try:
        targets = browser.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        session = browser.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Emulation.setDeviceMetricsOverride",
                     {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session)
        started = time.monotonic()
        browser.call("Page.navigate", {"url": report_path.resolve().as_uri()}, session)
        browser.wait_event("Page.loadEventFired")

        def evaluate(expression: str):
            result = browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
            return result.get("result", {}).get("value")

        deadline = time.monotonic() + 60
        while evaluate("document.body && document.body.getAttribute('data-ready')") != "1":
            assert time.monotonic() < deadline, "the report never became ready"
            time.sleep(0.05)
        load_seconds = time.monotonic() - started
        initial = json.loads(evaluate("JSON.stringify(window.mobileEp.stats())"))
        fold = json.loads(evaluate(_FOLD))
        shot = browser.call("Page.captureScreenshot", {"format": "png"}, session)
        screenshot.with_name(screenshot.stem + "-fold.png").write_bytes(base64.b64decode(shot["data"]))
        deadline = time.monotonic() + 60
        while True:  # (a panel laid out after the page said ready is fitted again: wait until all are drawn)
            evaluate("window.mobileEp.fitAll()")
            stats = json.loads(evaluate("JSON.stringify(window.mobileEp.stats())"))
            if all(s["drawn"] == s["total"] for s in stats) or time.monotonic() > deadline:
                break
            time.sleep(0.1)

        interaction = interact(evaluate) if interact is not None else None
        metrics = browser.call("Page.getLayoutMetrics", session=session)
        height = int(min(metrics["cssContentSize"]["height"], 4000))
        shot = browser.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                       "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height,
                                                                "scale": 1}}, session)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        evaluate("0")  # flush late events
        errors = []
        requests = []
        for event in browser.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"].get("exception", {}).get("description")
                              or params["exceptionDetails"].get("text"))
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                errors.append(params["entry"]["text"])
            elif event["method"] == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if not url.startswith(("file:", "data:", "about:")):
                    requests.append(url)
        return {"stats": stats, "initial": initial, "fold": fold, "errors": errors, "requests": requests,
                "load_seconds": load_seconds, "interaction": interaction}
    finally:
        browser.close()


def _keep(screenshot: pathlib.Path) -> None:
    target = os.environ.get("MOBILE_EP_SCREENSHOTS")
    if target:
        pathlib.Path(target).mkdir(parents=True, exist_ok=True)
        for shot in (screenshot, screenshot.with_name(screenshot.stem + "-fold.png")):
            if shot.exists():
                shutil.copy(shot, pathlib.Path(target) / shot.name)


def _png_size(path: pathlib.Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.mark.skipif(not (has_backend("nnapi") and has_backend("coreml")), reason="needs both built-in backends")
def test_densenet_report_renders_every_node_without_errors(tmp_path):
    """The issue's acceptance case: light_densenet121 with --ep nnapi,coreml."""
    model = LIGHT_DIR / "light_densenet121.onnx"
    with nodegraph.recording():
        report = api.check(model, ["nnapi", "coreml"])
    page = tmp_path / "densenet.html"
    html.write_html(report, page)
    screenshot = tmp_path / "light_densenet121.png"
    result = open_report(page, screenshot, tmp_path)
    _keep(screenshot)
    assert result["errors"] == []
    assert result["requests"] == []
    width, height = _png_size(screenshot)
    assert width == WIDTH and height > 600
    stats = {s["view"]: s for s in result["stats"]}
    assert set(stats) == {"asis:nnapi", "after:nnapi"}
    assert stats["asis:nnapi"]["drawn"] == stats["asis:nnapi"]["total"] == report.nodes
    assert all(f["top"] < HEIGHT / 2 and f["painted"] > 5000 for f in result["fold"])  # the graph on the first screen
    assert stats["after:nnapi"]["drawn"] == report.after_convert["nnapi"].nodes


def test_partitions_and_cpu_nodes_are_drawn(tmp_path, plugins):
    """A model split by CPU nodes: every node drawn, partitions and CPU nodes counted as the report says."""
    from test_html import split_model

    path = split_model(tmp_path, blocks=6)
    with nodegraph.recording():
        report = api.check(path, ["toy"], plugins=plugins)
    page = tmp_path / "split.html"
    html.write_html(report, page)

    def interact(evaluate):
        """Click a CPU node with the mouse, then use the toolbar: details, search, collapse, zoom, views."""
        # The page's own hit-testing: where it draws erf2 is where a click selects erf2 (and nothing beside it).
        hits = json.loads(evaluate("""(function () {
            var p = mobileEp.panels[0];
            p.canvas.scrollIntoView();
            var at = mobileEp.pointOf(0, 'erf2');
            return JSON.stringify({at: at, there: at && mobileEp.nodeAt(0, at.x, at.y),
                                   beside: at && mobileEp.nodeAt(0, at.x + 400, at.y + 400)});
        })()"""))
        # A click where the page draws erf2 at the moment of the click: the geometry is read and the pointer
        # events are dispatched in one turn of the page, so no redraw or layout can come in between.
        details = evaluate("""(function () {
            var p = mobileEp.panels[0], at = mobileEp.pointOf(0, 'erf2');
            var init = {clientX: at.x, clientY: at.y, pointerId: 1, pointerType: 'mouse', isPrimary: true,
                        button: 0, buttons: 1, bubbles: true};
            p.canvas.dispatchEvent(new PointerEvent('pointerdown', init));
            p.canvas.dispatchEvent(new PointerEvent('pointerup', Object.assign({}, init, {buttons: 0})));
            return document.getElementById('details').innerText;
        })()""")
        evaluate("""(function () {
            var box = document.getElementById('search');
            box.value = 'sigmoid';
            box.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'}));
            var p = mobileEp.panels[0];
            p.collapse.click();
            p.canvas.dispatchEvent(new WheelEvent('wheel', {deltaY: -300, clientX: 50, clientY: 50}));
            p.select.value = 'after:toy'; p.select.dispatchEvent(new Event('change'));
            document.querySelector('a.node-link').click();
        })()""")
        return {"hits": hits, "details": details,
                "search": evaluate("document.getElementById('search-status').textContent"),
                "after": evaluate("document.getElementById('details').innerText")}

    result = open_report(page, tmp_path / "split.png", tmp_path, interact)
    assert result["errors"] == [] and result["requests"] == []
    clicked = result["interaction"]
    assert clicked["hits"]["at"] is not None and clicked["hits"]["there"] == "erf2"
    assert clicked["hits"]["beside"] != "erf2"
    assert "Erf" in clicked["details"] and "toy has no rule for Erf" in clicked["details"]
    assert "toy — as is" in clicked["details"] and "CPU" in clicked["details"]
    assert clicked["search"] == "1/6"
    assert "Erf" in clicked["after"]  # the first node link of the CPU table is an Erf
    (left, right) = result["stats"]
    backend = report.backends["toy"]
    assert left["drawn"] == left["total"] == report.nodes
    assert left["partitions"] == len(backend.partitions) > 1
    assert left["cpu"] == len(backend.unsupported) > 0
    assert right["view"] == "after:toy"


def test_a_5000_node_model_stays_usable(tmp_path, plugins):
    """Chains collapse and every node is still accounted for (the time to ready is not asserted: it depends
    on the machine)."""
    from test_html import split_model

    path = split_model(tmp_path, blocks=715)  # 7 nodes a block: 5,005 nodes
    with nodegraph.recording():
        report = api.check(path, ["toy"], plugins=plugins, after_convert=False)
    assert report.nodes >= 5000
    page = tmp_path / "big.html"
    html.write_html(report, page)
    result = open_report(page, tmp_path / "big.png", tmp_path)
    _keep(tmp_path / "big.png")
    assert result["errors"] == [] and result["requests"] == []
    (stats,) = result["stats"]
    assert stats["collapsed"] is True
    assert stats["drawn"] == stats["total"] == report.nodes


@pytest.mark.skipif(not has_backend("nnapi"), reason="needs the NNAPI backend")
def test_convert_report_shows_the_graph_above_the_fold(tmp_path):
    """convert --html: the summary, then the graph (laid out by dagre, chains vertical) on the first screen of
    a 1600x1000 window, then the tables, collapsed."""
    model = LIGHT_DIR / "light_resnet50.onnx"
    page = tmp_path / "resnet.html"
    report = api.convert(model, "nnapi", tmp_path / "out", verify=False, html=page)

    def interact(evaluate):
        return json.loads(evaluate("""JSON.stringify((function () {
            var p = mobileEp.panels[0], straight = 0, links = 0, outs = {}, ins = {}, e = p.edges;
            for (var i = 0; i < e.length; i += 2) { outs[e[i]] = (outs[e[i]] || 0) + 1; ins[e[i + 1]] = (ins[e[i + 1]] || 0) + 1; }
            for (i = 0; i < e.length; i += 2) {
              if (outs[e[i]] === 1 && ins[e[i + 1]] === 1) { links++; if (Math.abs(p.px[e[i]] - p.px[e[i + 1]]) < 1) straight++; }
            }
            var top = function (sel) { return document.querySelector(sel).getBoundingClientRect().top + window.scrollY; };
            return { links: links, straight: straight, summary: top('#summary'), graphs: top('#graphs'),
                     tables: top('#tables'), open: document.querySelectorAll('#tables details[open]').length,
                     closed: document.querySelectorAll('#tables details').length };
        })())"""))

    result = open_report(page, tmp_path / "resnet-convert.png", tmp_path, interact)
    _keep(tmp_path / "resnet-convert.png")
    assert result["errors"] == [] and result["requests"] == []
    page_layout = result["interaction"]
    assert page_layout["summary"] < page_layout["graphs"] < page_layout["tables"]
    assert page_layout["open"] == 0 and page_layout["closed"] >= 3
    # A chain (one edge out of a node, the only edge into the next) is drawn straight down.
    assert page_layout["links"] > 50 and page_layout["straight"] >= 0.9 * page_layout["links"]
    # The first screen: both panels start in its upper half and are painted over most of their visible part.
    for panel, first in zip(result["fold"], result["initial"], strict=True):
        assert panel["top"] < HEIGHT / 2 and panel["visible"] > HEIGHT / 3
        assert panel["painted"] > 5000
        assert first["layout"] == "dagre" and first["scale"] >= 0.3 and first["drawn"] > 10
    stats = {s["view"]: s for s in result["stats"]}
    assert stats["before"]["drawn"] == stats["before"]["total"] == report.before.nodes
    assert stats["converted"]["drawn"] == stats["converted"]["total"] == report.check.nodes
