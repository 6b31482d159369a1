"""The HTML report: one self-contained file that draws the graph node by node, coloured by where it runs.

``mobile-ep check MODEL --html report.html`` (and ``convert``) writes it.  The file needs no network and
no server: the data, the script and the styles are inline, and a Content-Security-Policy forbids every
request.  What it shows:

- first, a summary table per backend (nodes claimed, partitions, verdict, as is and after ``convert``);
- then the graph, node by node, in two panels side by side — by default the first backend's view of the
  model *as is* and *after convert* — each node coloured by the partition it lands in, CPU nodes in red
  with the reason, edges that cross a partition boundary (a copy between CPU and accelerator) in red;
- last, collapsed, the rewrites ``convert`` applies and the nodes left on CPU grouped by cause; a click on
  a name selects the node in both panels.

The page lays the graph out with dagre (``static/dagre.min.js``, vendored with its licence, inlined): a
layered layout, top to bottom, that keeps chains vertical and routes edges around nodes; it opens on the
top of the graph at a legible scale (pan with the mouse, zoom with the wheel, double-click to see it all).
Chains of nodes that all run in the same place can be collapsed into one box (on by default above
:data:`COLLAPSE_ABOVE` nodes).  For graphs too large for dagre in a browser, the layout computed here
ahead of time (:func:`layered_layout`: longest-path layering, barycenter ordering sweeps, x coordinates
by isotonic regression) is drawn instead, its layers wrapped into columns to fit the panel.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import html
import importlib.resources
import json
import os
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mobile_ep import __version__

if TYPE_CHECKING:
    from mobile_ep.reports.model import BackendReport, Cause, CheckReport, ConvertReport
    from mobile_ep.reports.nodegraph import GraphSnapshot

__all__ = [
    "COLLAPSE_ABOVE",
    "MissingGraphError",
    "report_data",
    "render",
    "write_html",
    "render_index",
    "batch_index",
    "layered_layout",
    "place",
    "find_chains",
]

#: Graphs with more nodes than this open with chains collapsed (a toggle in the page).
COLLAPSE_ABOVE = 1500
#: Shortest run of nodes collapsed into one box.
MIN_CHAIN = 3
#: Longest tables in the page (rewrites, reasons); the graph itself always has every node.
_MAX_ROWS = 300


class MissingGraphError(ValueError):
    """The report carries no graph snapshots (it was not produced under ``nodegraph.recording()``)."""


# --------------------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------------------
def layered_layout(count: int, edges: Iterable[tuple[int, int]], *, sweeps: int = 4
                   ) -> tuple[list[int], list[float]]:
    """A layered drawing of a DAG of *count* items: each item's layer (0 = top) and x (in node widths).

    Linear time per sweep: longest-path layering (sources pulled down next to their first consumer),
    ordering by barycenter sweeps from a depth-first initial order, then x positions by isotonic
    regression of the neighbours' mean x under the order and a minimum gap of 1.  Back edges of a cyclic
    input are ignored.
    """
    succ: list[list[int]] = [[] for _ in range(count)]
    pred: list[list[int]] = [[] for _ in range(count)]
    for s, d in edges:
        if s != d:
            succ[s].append(d)
            pred[d].append(s)
    order = _topological(count, succ, pred)
    rank = [0] * count
    for i, v in enumerate(order):
        rank[v] = i
    layer = [0] * count
    for v in order:
        lv = layer[v] + 1
        for w in succ[v]:
            if rank[w] > rank[v] and layer[w] < lv:
                layer[w] = lv
    for v in reversed(order):  # sources (inputs, constants) just above their first consumer
        if not pred[v] and succ[v]:
            layer[v] = max(layer[v], min(layer[w] for w in succ[v]) - 1)
    # Only edges going down the layers take part in ordering (back edges of a cycle do not).
    down_pred = [[p for p in pred[v] if layer[p] < layer[v]] for v in range(count)]
    down_succ = [[s for s in succ[v] if layer[s] > layer[v]] for v in range(count)]

    depth_first = _depth_first(count, order, down_succ)
    layers: list[list[int]] = [[] for _ in range(max(layer, default=-1) + 1)]
    for v in sorted(range(count), key=depth_first.__getitem__):
        layers[layer[v]].append(v)
    pos = [0.0] * count

    def renumber(members: list[int]) -> None:
        middle = (len(members) - 1) / 2
        for i, v in enumerate(members):
            pos[v] = i - middle

    for members in layers:
        renumber(members)
    for sweep in range(sweeps):
        downwards = sweep % 2 == 0
        neighbours = down_pred if downwards else down_succ
        for members in (layers if downwards else reversed(layers)):
            if len(members) < 2:
                continue
            keys = {v: (sum(pos[n] for n in neighbours[v]) / len(neighbours[v]) if neighbours[v] else pos[v])
                    for v in members}
            members.sort(key=keys.__getitem__)
            renumber(members)

    x = list(pos)
    for sweep in range(sweeps + 1):
        downwards = sweep % 2 == 0
        neighbours = down_pred if downwards else down_succ
        for members in (layers if downwards else reversed(layers)):
            if len(members) == 1:  # most layers of a deep network: no order to keep
                v = members[0]
                if neighbours[v]:
                    x[v] = sum(x[n] for n in neighbours[v]) / len(neighbours[v])
                continue
            desired = [(sum(x[n] for n in neighbours[v]) / len(neighbours[v]) if neighbours[v] else x[v])
                       for v in members]
            for v, xv in zip(members, place(desired), strict=True):
                x[v] = xv
    low = min(x, default=0.0)
    return layer, [round(v - low, 2) for v in x]


def _topological(count: int, succ: list[list[int]], pred: list[list[int]]) -> list[int]:
    remaining = [len(p) for p in pred]
    queue = collections.deque(i for i in range(count) if remaining[i] == 0)
    order: list[int] = []
    while queue:
        v = queue.popleft()
        order.append(v)
        for w in succ[v]:
            remaining[w] -= 1
            if remaining[w] == 0:
                queue.append(w)
    if len(order) < count:  # a cycle (not in a valid model): the rest in index order
        placed = set(order)
        order.extend(i for i in range(count) if i not in placed)
    return order


def _depth_first(count: int, order: Sequence[int], succ: list[list[int]]) -> list[int]:
    """Discovery index of each item in a depth-first walk from the sources (keeps branches together)."""
    index = [-1] * count
    counter = 0
    for root in order:
        if index[root] >= 0:
            continue
        stack = [root]
        while stack:
            v = stack.pop()
            if index[v] >= 0:
                continue
            index[v] = counter
            counter += 1
            stack.extend(w for w in reversed(succ[v]) if index[w] < 0)
    return index


def place(desired: Sequence[float]) -> list[float]:
    """Positions in the given order, at least 1 apart, as close as possible (least squares) to *desired*.

    With y_i = x_i - i the constraint becomes y non-decreasing: isotonic regression of d_i - i, solved
    by pool-adjacent-violators in linear time.
    """
    blocks: list[list[float]] = []  # [sum, count]
    for i, d in enumerate(desired):
        blocks.append([d - i, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, n = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += n
    result: list[float] = []
    for total, n in blocks:
        mean = total / n
        start = len(result)
        result.extend([mean + start + k for k in range(int(n))])
    return result


def find_chains(count: int, edges: Iterable[tuple[int, int]], signature: Sequence[Any], *,
                min_length: int = MIN_CHAIN) -> list[list[int]]:
    """Maximal runs a -> b -> c ... where each link is the only edge out of a and into b, and every member
    has the same *signature* (its placement in every view); only items ``< len(signature)`` take part."""
    nodes = len(signature)
    out_degree = [0] * count
    in_degree = [0] * count
    only_succ = [-1] * count
    for s, d in set(edges):
        if s == d:
            continue
        out_degree[s] += 1
        in_degree[d] += 1
        only_succ[s] = d

    def link(a: int) -> int:
        b = only_succ[a]
        if a < nodes and out_degree[a] == 1 and b < nodes and in_degree[b] == 1 and signature[a] == signature[b]:
            return b
        return -1

    linked_to = [False] * count
    for a in range(nodes):
        b = link(a)
        if b >= 0:
            linked_to[b] = True
    chains = []
    for a in range(nodes):
        if linked_to[a]:
            continue
        chain = [a]
        b = link(a)
        while b >= 0 and len(chain) <= nodes:
            chain.append(b)
            b = link(b)
        if len(chain) >= min_length:
            chains.append(chain)
    return chains


# --------------------------------------------------------------------------------------------------
# Report data
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _View:
    id: str
    label: str
    graph: str
    backend: str | None
    kind: str
    place: list[int]
    parts: list[dict]
    reasons: dict[int, str]
    summary: dict

    def as_dict(self) -> dict:
        return {"id": self.id, "label": self.label, "graph": self.graph, "backend": self.backend, "kind": self.kind,
                "place": self.place, "parts": self.parts, "reasons": {str(k): v for k, v in self.reasons.items()},
                "summary": self.summary}


def _graph_data(snapshot: GraphSnapshot) -> tuple[dict, list[tuple[int, int]], int]:
    """Nodes, values and io items of a snapshot, and its item-level edges."""
    values: dict[str, int] = {}
    table: list[list] = []

    def value(name: str) -> int:
        if name not in values:
            values[name] = len(table)
            table.append([name, snapshot.types.get(name, ""), 1 if name in snapshot.constants else 0])
        return values[name]

    nodes = snapshot.nodes
    producer: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for name in node.outputs:
            if name:
                producer[name] = i
    ins = [[value(n) if n else -1 for n in node.inputs] for node in nodes]
    implicit = [[value(n) for n in node.implicit_inputs] for node in nodes]
    outs = [[value(n) if n else -1 for n in node.outputs] for node in nodes]
    consumers: dict[str, list[int]] = collections.defaultdict(list)
    for i, node in enumerate(nodes):
        for name in dict.fromkeys((*node.inputs, *node.implicit_inputs)):
            if name:
                consumers[name].append(i)
    edges: set[tuple[int, int]] = set()
    for i, node in enumerate(nodes):
        for name in (*node.inputs, *node.implicit_inputs):
            if name and name in producer and producer[name] != i:
                edges.add((producer[name], i))
    io: list[list] = []
    count = len(nodes)
    for name in snapshot.inputs:
        if consumers.get(name):
            item = count + len(io)
            io.append(["in", value(name)])
            edges.update((item, c) for c in consumers[name])
    unused_inputs = sum(1 for name in snapshot.inputs if not consumers.get(name))
    for name in snapshot.outputs:
        item = count + len(io)
        io.append(["out", value(name)])
        if name in producer:
            edges.add((producer[name], item))
        elif name in values or name in snapshot.inputs:  # an input passed straight through
            for j, (kind, v) in enumerate(io[:-1]):
                if kind == "in" and table[v][0] == name:
                    edges.add((count + j, item))
    data = {
        "names": [n.name for n in nodes],
        "ops": [n.op for n in nodes],
        "attrs": [n.attrs for n in nodes],
        "ins": ins,
        "implicit": implicit if any(implicit) else [],
        "outs": outs,
        "values": table,
        "io": io,
        "unusedInputs": unused_inputs,
    }
    return data, sorted(edges), count + len(io)


def _layout_data(items: int, nodes: int, edges: list[tuple[int, int]], signature: Sequence[Any]) -> dict:
    layer, x = layered_layout(items, edges)
    result: dict = {"edges": [v for e in edges for v in e], "layer": layer, "x": x}
    chains = find_chains(items, edges, signature)
    if chains:
        rep = list(range(items))
        for chain in chains:
            for member in chain[1:]:
                rep[member] = chain[0]
        kept = [i for i in range(items) if rep[i] == i]
        compact = {item: k for k, item in enumerate(kept)}
        compact_edges = sorted({(compact[rep[s]], compact[rep[d]]) for s, d in edges if rep[s] != rep[d]})
        c_layer, c_x = layered_layout(len(kept), compact_edges)
        result["collapsed"] = {"chains": chains, "items": kept, "layer": c_layer, "x": c_x}
    return result


def _partition_dict(backend: str, nodes: Sequence[str], estimate: Mapping | None, ops: Mapping[str, int] | None
                    ) -> dict:
    part: dict = {"backend": backend, "size": len(nodes)}
    if ops:
        top = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))
        part["ops"] = ", ".join(f"{op} x{n}" for op, n in top[:6]) + (", …" if len(top) > 6 else "")
    if estimate is not None:
        part["kept"] = bool(estimate.get("kept", True))
        if estimate.get("reason"):
            part["note"] = str(estimate["reason"])
    return part


def _backend_view(view_id: str, label: str, graph_id: str, kind: str, report: BackendReport,
                  index: Mapping[str, int]) -> _View:
    place = [-1] * len(index)
    parts = []
    for p in report.partitions:
        pid = len(parts)
        parts.append(_partition_dict(report.backend, p.nodes, p.estimate, p.ops))
        for name in p.nodes:
            i = index.get(name)
            if i is not None:
                place[i] = pid
    reasons = {index[u.node]: u.reason for u in report.unsupported if u.node in index}
    summary = {"nodes": report.nodes, "claimed": report.supported_nodes, "partitions": len(report.partitions),
               "verdict": report.verdict}
    return _View(view_id, label, graph_id, report.backend, kind, place, parts, reasons, summary)


def _require_graph(report: BackendReport, what: str) -> GraphSnapshot:
    if report.graph is None:
        raise MissingGraphError(
            f"{what}: the report carries no graph; produce it with mobile_ep.check(..., html=...) or inside "
            "mobile_ep.reports.nodegraph.recording()")
    return report.graph


def report_data(report: CheckReport | ConvertReport) -> dict:
    """Everything the page draws, as JSON-ready data (graphs with their layouts, views, tables)."""
    from mobile_ep.reports.model import CheckReport

    graphs: dict[str, GraphSnapshot] = {}
    views: list[_View] = []
    rewrites: dict[str, list[dict]] = {}
    pairs: list[list[str]] = []

    def add_graph(graph_id: str, snapshot: GraphSnapshot) -> str:
        for existing, g in graphs.items():
            if g is snapshot:
                return existing
        graphs[graph_id] = snapshot
        return graph_id

    if isinstance(report, CheckReport):
        kind = "check"
        for name, b in report.backends.items():
            gid = add_graph("asis", _require_graph(b, name))
            views.append(_backend_view(f"asis:{name}", f"{name} — as is", gid, "asis", b, graphs[gid].index()))
            after = report.after_convert.get(name)
            if after is not None:
                agid = add_graph(f"after:{name}", _require_graph(after, f"{name} after convert"))
                views.append(_backend_view(f"after:{name}", f"{name} — after convert", agid, "after", after,
                                           graphs[agid].index()))
                rewrites[name] = list(after.rewrites)
        if report.combined is not None and "asis" in graphs:
            views.append(_combined_view(report, graphs["asis"]))
        for name in report.backends:  # default panels: as is | after convert, for the first backend
            right = f"after:{name}" if name in report.after_convert else (
                "combined" if report.combined is not None else f"asis:{name}")
            pairs.append([f"asis:{name}", right])
    else:
        kind = "convert"
        name = report.backend
        if report.before is not None:
            bgid = add_graph("before", _require_graph(report.before, "the model before conversion"))
            views.append(_backend_view("before", f"{name} — before mobile-ep", bgid, "before", report.before,
                                       graphs[bgid].index()))
        cgid = add_graph("converted", _require_graph(report.check, "the converted model"))
        views.append(_backend_view("converted", f"{name} — converted", cgid, "converted", report.check,
                                   graphs[cgid].index()))
        rewrites[name] = list(report.check.rewrites)
        pairs.append(["before" if report.before is not None else "converted", "converted"])

    graph_data = {}
    for gid, snapshot in graphs.items():
        data, edges, items = _graph_data(snapshot)
        members = [v for v in views if v.graph == gid]
        signature = list(zip(*(v.place for v in members), strict=True)) if members else [()] * len(snapshot)
        data["layout"] = _layout_data(items, len(snapshot), edges, signature)
        graph_data[gid] = data
    return {
        "format": 1,
        "kind": kind,
        "tool": f"mobile-ep {__version__}",
        "model": report.model,
        "graphs": graph_data,
        "views": [v.as_dict() for v in views],
        "pairs": pairs,
        "rewrites": rewrites,
        "collapseAbove": COLLAPSE_ABOVE,
    }


def _combined_view(report: CheckReport, snapshot: GraphSnapshot) -> _View:
    assert report.combined is not None
    index = snapshot.index()
    place = [-1] * len(index)
    parts = []
    for p in report.combined.partitions:
        pid = len(parts)
        parts.append(_partition_dict(p["backend"], p["nodes"], None, None))
        for name in p["nodes"]:
            if name in index:
                place[index[name]] = pid
    reasons: dict[int, list[str]] = collections.defaultdict(list)
    for name, b in report.backends.items():
        for u in b.unsupported:
            i = index.get(u.node)
            if i is not None and place[i] < 0:
                reasons[i].append(u.reason if u.reason.startswith(f"{name}") else f"{name}: {u.reason}")
    order = " > ".join(report.combined.order)
    claimed = sum(v for k, v in report.combined.placement.items() if k != "cpu")
    summary = {"nodes": report.nodes, "claimed": claimed, "partitions": len(parts), "verdict": None,
               "placement": report.combined.placement}
    return _View("combined", f"all together ({order})", "asis", None, "combined", place, parts,
                 {i: " | ".join(r) for i, r in reasons.items()}, summary)


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------
def _asset(name: str) -> str:
    return importlib.resources.files("mobile_ep.reports").joinpath("static", name).read_text(encoding="utf-8")


def _json_for_script(data: object) -> str:
    """JSON safe inside a <script> element (no ``</script>``, no HTML comment openers)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


_CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'")

_VERDICT_TEXT = {"YES": "should perform well", "MAYBE": "worth measuring on a device",
                 "NO": "likely slower than the CPU alone"}


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _verdict(verdict: str | None) -> str:
    if not verdict:
        return ""
    return f'<span class="verdict v-{_e(verdict.lower())}" title="{_e(_VERDICT_TEXT.get(verdict, ""))}">' \
           f"{_e(verdict)}</span>"


def _share(claimed: int, total: int) -> str:
    pct = 100.0 * claimed / total if total else 0.0
    return f'{claimed}/{total} <span class="dim">({pct:.1f}%)</span>'


def _node_link(name: str, graph: str) -> str:
    return f'<a href="#" class="node-link" data-graph="{_e(graph)}" data-node="{_e(name)}">{_e(name)}</a>'


def _cause_text(report: BackendReport, cause: Cause) -> str:
    ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in cause.ops.items())
    if cause.kind == "dynamic":
        fix = f": fix them with {report.shape_fix}" if report.shape_fix else ""  # (none: the user fixed them)
        return f"dynamic shapes ({ops}){fix}"
    if cause.kind == "no_rule":
        return f"{report.backend} has no rule for {ops}"
    return f"{ops}: {cause.text}"


def _cpu_table(report: BackendReport, graph: str) -> str:
    """The nodes left on CPU, one row per cause (each node's own reason is in the graph's details)."""
    from mobile_ep.reports.model import causes

    if not report.unsupported:
        return '<p class="dim">Every node runs on the accelerator.</p>'
    rows = []
    for cause in causes(report)[:_MAX_ROWS]:
        names = cause.nodes
        shown = ", ".join(_node_link(n, graph) for n in names[:8])
        more = f" … (+{len(names) - 8})" if len(names) > 8 else ""
        rows.append(f"<tr><td class='num'>{len(names)}</td><td>{_e(_cause_text(report, cause))}</td>"
                    f"<td>{shown}{more}</td></tr>")
    return ("<table class='grid'><thead><tr><th>nodes</th><th>cause</th><th>which</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _rewrite_table(rewrites: Sequence[Mapping], backend: str, graph: str) -> str:
    if not rewrites:
        return '<p class="dim">No rewrites: convert keeps every node as it is.</p>'
    counts = collections.Counter(str(r.get("rewrite", "")) for r in rewrites)
    head = ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))
    rows = []
    for r in rewrites[:_MAX_ROWS]:
        into = r.get("into") or []
        rows.append(f"<tr class='rewrite-row' data-backend='{_e(backend)}' data-node='{_e(r.get('node', ''))}' "
                    f"data-rewrite='{_e(r.get('rewrite', ''))}'><td>{_e(r.get('rewrite', ''))}</td>"
                    f"<td>{_node_link(str(r.get('node', '')), graph)}</td><td>{_e(r.get('op', ''))}</td>"
                    f"<td>{_e(', '.join(map(str, into)))}</td></tr>")
    return (f"<p>{len(rewrites)} rewrite{'s' if len(rewrites) != 1 else ''}: {_e(head)}</p>"
            "<table class='grid rewrites'><thead><tr><th>rewrite</th><th>node</th><th>op</th><th>into</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table>"
            + (f"<p class='dim'>… and {len(rewrites) - _MAX_ROWS} more (all of them are in the JSON report)</p>"
               if len(rewrites) > _MAX_ROWS else ""))


def _options(report: BackendReport) -> str:
    return " ".join(f"{k}={v}" for k, v in report.options.items())


def _check_tables(report: CheckReport) -> tuple[str, str]:
    """The summary (above the graph) and the tables (below it, collapsed)."""
    rows = []
    for name, b in report.backends.items():
        after = report.after_convert.get(name)
        after_cells = ("<td>" + _share(after.supported_nodes, after.nodes) + f"</td><td class='num'>"
                       f"{len(after.partitions)}</td><td>{_verdict(after.verdict)}</td><td class='num'>"
                       f"{len(after.rewrites)}</td>") if after is not None else "<td colspan='4' class='dim'>-</td>"
        rows.append(f"<tr><th><span class='swatch' data-backend='{_e(name)}'></span>{_e(name)} "
                    f"<span class='dim'>{_e(b.version)}</span><div class='opts'>{_e(_options(b))}</div></th>"
                    f"<td>{_share(b.supported_nodes, b.nodes)}</td><td class='num'>{len(b.partitions)}</td>"
                    f"<td>{_verdict(b.verdict)}</td>{after_cells}</tr>")
    table = ("<table class='grid summary'><thead><tr><th rowspan='2'>backend</th><th colspan='3'>as is</th>"
             "<th colspan='4'>after mobile-ep convert</th></tr><tr><th>claimed</th><th>partitions</th>"
             "<th>verdict</th><th>claimed</th><th>partitions</th><th>verdict</th><th>rewrites</th></tr></thead>"
             "<tbody>" + "".join(rows) + "</tbody></table>")
    extra = []
    if report.shape_changes:
        fixed = ", ".join(f"{k} {old} → {new}" for k, (old, new) in report.shape_changes.items())
        extra.append(f"<p class='line'>Shapes fixed for the after-convert view: {_e(fixed)}</p>")
    for together in [report.combined, *report.other_platforms] if report.combined is not None else []:
        placement = ", ".join(f"{k}: {v}" for k, v in together.placement.items())
        where = f" on {together.platform}" if together.platform != "any" else ""
        extra.append(f"<p class='line'>All together{_e(where)}, in priority order {_e(' > '.join(together.order))}"
                     f": {_e(placement)} nodes.</p>")
    hints = [h for b in report.backends.values() for h in b.suggestions]
    if hints:
        extra.append(f"<p class='line hints'>{_e(hints[0])}"
                     + (f" <span class='dim'>(+{len(hints) - 1} more hints below)</span>" if len(hints) > 1 else "")
                     + "</p>")
    details = []
    for name, b in report.backends.items():
        after = report.after_convert.get(name)
        hints_html = "".join(f"<li>{_e(h)}</li>" for h in b.suggestions)
        details.append(
            f"<details class='backend'><summary>{_e(name)}: "
            f"{len(b.unsupported)} node{'s' if len(b.unsupported) != 1 else ''} left on CPU as is"
            + (f", {len(after.unsupported)} after convert; {len(after.rewrites)} rewrites" if after else "")
            + "</summary>"
            + (f"<ul class='hints'>{hints_html}</ul>" if hints_html else "")
            + "<h4>Left on CPU, as is</h4>" + _cpu_table(b, "asis")
            + ((f"<h4>Rewrites applied by convert</h4>{_rewrite_table(after.rewrites, name, 'asis')}"
                f"<h4>Left on CPU after convert</h4>{_cpu_table(after, 'after:' + name)}") if after else "")
            + "</details>")
    return table + "".join(extra), "".join(details)


def _convert_tables(report: ConvertReport) -> tuple[str, str]:
    """The summary (above the graph) and the tables (below it, collapsed)."""
    c = report.check
    b = report.before
    before_cells = (f"<td>{_share(b.supported_nodes, b.nodes)}</td><td class='num'>{len(b.partitions)}</td>"
                    f"<td>{_verdict(b.verdict)}</td>") if b is not None else "<td colspan='3'>-</td>"
    table = ("<table class='grid summary'><thead><tr><th rowspan='2'>backend</th><th colspan='3'>before mobile-ep"
             "</th><th colspan='4'>converted</th></tr><tr><th>claimed</th><th>partitions</th><th>verdict</th>"
             "<th>claimed</th><th>partitions</th><th>verdict</th><th>rewrites</th></tr></thead><tbody>"
             f"<tr><th><span class='swatch' data-backend='{_e(c.backend)}'></span>{_e(c.backend)} "
             f"<span class='dim'>{_e(c.version)}</span><div class='opts'>{_e(_options(c))}</div></th>{before_cells}"
             f"<td>{_share(c.supported_nodes, c.nodes)}</td><td class='num'>{len(c.partitions)}</td>"
             f"<td>{_verdict(c.verdict)}</td><td class='num'>{len(c.rewrites)}</td></tr></tbody></table>")
    summary = [table]
    if report.verification:
        ok = all(v.ok for v in report.verification)
        summary.append(f"<p class='line'>Verification: {len(report.verification)} model"
                       f"{'s' if len(report.verification) != 1 else ''} run with onnxruntime on the same inputs: "
                       + ("every output matches the original." if ok else "<b class=bad>an output differs</b>.")
                       + "</p>")
    else:
        summary.append("<p class='line dim'>Verification skipped (--no-verify).</p>")
    if report.interface:
        items = "".join(f"<li>{_e(change.text())}</li>" for change in report.interface)
        summary.append(f"<div class='line interface'>The app's interface changed; the written model's inputs: "
                       f"<code>{_e(report.app_inputs)}</code><ul>{items}</ul></div>")
    hints = [h for h in c.suggestions]
    if hints:
        summary.append(f"<p class='line hints'>{_e(hints[0])}</p>")
    parts = []
    outputs = "".join(f"<li><code>{_e(kind)}</code> {_e(path)}</li>" for kind, path in report.outputs.items())
    parts.append(f"<details><summary>Written: {len(report.outputs)} files</summary><ul>{outputs}</ul></details>")
    if report.verification:
        rows = []
        for v in report.verification:
            for o in v.outputs:
                rows.append(f"<tr><td>{_e(pathlib.Path(v.candidate).name)}</td><td>{_e(o.name)}</td>"
                            f"<td class='num'>{o.max_abs:.2e}</td><td class='num'>{_rel_cell(o)}</td>"
                            f"<td>{'ok' if o.ok else '<b class=bad>MISMATCH</b>'}</td></tr>")
        parts.append("<details><summary>Verification (onnxruntime, same inputs)</summary><table class='grid'><thead>"
                     "<tr><th>model</th><th>output</th><th>max abs error</th><th>max rel error</th><th></th></tr>"
                     "</thead><tbody>" + "".join(rows) + "</tbody></table></details>")
    if report.cpu_fusion is not None:
        f = report.cpu_fusion
        parts.append(f"<p>CPU-side fusion: {f.nodes_before} → {f.nodes_after} nodes outside the partitions.</p>")
    hints_html = "".join(f"<li>{_e(h)}</li>" for h in c.suggestions)
    if hints_html:
        parts.append(f"<ul class='hints'>{hints_html}</ul>")
    parts.append(f"<details><summary>Rewrites applied: {len(c.rewrites)}</summary>"
                 f"{_rewrite_table(c.rewrites, c.backend, 'before')}</details>")
    if b is not None:
        parts.append(f"<details><summary>Left on CPU before mobile-ep: {len(b.unsupported)} nodes</summary>"
                     f"{_cpu_table(b, 'before')}</details>")
    parts.append(f"<details><summary>Left on CPU in the converted model: {len(c.unsupported)} nodes</summary>"
                 f"{_cpu_table(c, 'converted')}</details>")
    return "".join(summary), "".join(parts)


def render(report: CheckReport | ConvertReport, *, title: str | None = None) -> str:
    """The complete, self-contained HTML page for *report* (which must carry graph snapshots)."""
    from mobile_ep.reports.model import CheckReport

    data = report_data(report)
    model_name = os.path.basename(str(report.model)) or str(report.model)
    is_check = isinstance(report, CheckReport)
    title = title or f"{model_name} — mobile-ep {'check' if is_check else 'convert'}"
    nodes = report.nodes if is_check else (report.before.nodes if report.before is not None else report.check.nodes)
    summary, tables = _check_tables(report) if is_check else _convert_tables(report)  # type: ignore[arg-type]
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M")
    header = (f"<header><h1>{_e(model_name)}</h1><p class='dim'>{_e(report.model)} · {nodes} nodes as an ORT "
              f"session sees them after basic optimization · mobile-ep {_e(__version__)} "
              f"{'check' if is_check else 'convert'} · {_e(when)}</p></header>")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head>"
        f"<body data-kind='{'check' if is_check else 'convert'}'>{header}"
        f"<section id='summary'>{summary}</section>"
        "<section id='graphs'><div class='toolbar'>"
        "<label>find <input id='search' type='search' placeholder='node name or op' size='24'></label>"
        "<span id='search-status' class='dim'></span>"
        "<label><input id='single' type='checkbox'> one panel</label>"
        "<span class='help dim'>drag to pan · wheel to zoom · double-click to fit · click a node for details</span>"
        "</div><div id='panels'></div><aside id='details' class='dim'>Click a node to see its op, shapes and "
        "where it runs.</aside></section>"
        f"<section id='tables'><h2>Details</h2>{tables}</section>"
        f"<script id='mobile-ep-data' type='application/json'>{_json_for_script(data)}</script>"
        f"<script>{_asset('dagre.min.js')}</script><script>{_asset('report.js')}</script></body></html>\n"
    )


def write_html(report: CheckReport | ConvertReport, path: str | os.PathLike) -> pathlib.Path:
    """Write the HTML report for *report* to *path*, atomically."""
    from mobile_ep.model_io import atomic_path

    target = pathlib.Path(path)
    text = render(report)
    if target.parent and not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target


def render_index(title: str, header: Sequence[str], rows: Sequence[tuple[str | None, Sequence[str]]]) -> str:
    """A small self-contained page with one table: the summary of a batch, each row linking its report."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for link, cells in rows:
        first = _e(cells[0]) if link is None else f"<a href='{_e(link)}'>{_e(cells[0])}</a>"
        rest = "".join(f"<td>{_e(c)}</td>" for c in cells[1:])
        body.append(f"<tr><td>{first}</td>{rest}</tr>")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\"><title>{_e(title)}</title>"
            f"<style>{_asset('report.css')}</style></head><body><header><h1>{_e(title)}</h1></header>"
            f"<table class='grid summary'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            "</body></html>\n")


def _rel_cell(diff) -> str:
    """The relative error of a verified output, where it is measured (and the steps of a quantized one)."""
    rel = "not measured" if diff.max_rel is None else f"{diff.max_rel:.2e}"
    if diff.rel_floor and diff.max_rel is not None:
        rel += f" (|ref| &gt; {diff.rel_floor:.0e})"
    if diff.max_steps is not None:
        rel += f"; {diff.max_steps:g} step(s)"
    return rel


def _index_cell(entry: Mapping | None) -> str:
    if not entry:
        return "-"
    count = entry.get("partitions", 0)
    return (f"{entry.get('claimed')}/{entry.get('nodes')} claimed, {count} partition{'' if count == 1 else 's'}, "
            f"{entry.get('verdict')}")


def batch_index(kind: str, results: Sequence[Any]) -> str:
    """``index.html`` of a batch (``check``/``convert`` of several models with ``--html DIR``): per model its
    nodes and, per backend, the model as is and after convert (``check``) or before mobile-ep and converted
    (``convert``); each model links its report.  *results*: :class:`mobile_ep.cli.batch.ModelResult`."""
    first, second = ("as is", "after convert") if kind == "check" else ("before mobile-ep", "converted")
    backends = list(dict.fromkeys(name for r in results if r.ok for name in r.row.get("backends", {})))
    header = ["model", "nodes"] + [f"{name} {column}" for name in backends for column in (first, second)]
    rows: list[tuple[str | None, list[str]]] = []
    for r in results:
        if not r.ok:
            rows.append((None, [r.model, f"FAILED (exit {r.exit_code}): {r.error.splitlines()[0]}"]))
            continue
        cells = [r.model, str(r.row.get("nodes", ""))]
        for name in backends:
            entry = r.row.get("backends", {}).get(name)
            before, after = (entry, (entry or {}).get("after")) if kind == "check" else ((entry or {}).get("before"), entry)
            cells += [_index_cell(before), _index_cell(after)]
        rows.append((pathlib.Path(r.html).name if r.html else None, cells))
    return render_index(f"mobile-ep {kind}: {len(results)} models", header, rows)
