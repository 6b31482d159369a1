"""The HTML report without a browser: layout, data, self-containment, the --html option."""

from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import helper

from mepkit import LIGHT_DIR, const, has_backend, make_model, tensor
from mobile_ep import pipeline as api
from mobile_ep.cli.main import main
from mobile_ep.reports import html, nodegraph


def split_model(folder: pathlib.Path, blocks: int, width: int = 8, name: str = "split.onnx") -> pathlib.Path:
    """``blocks`` blocks of 7 nodes; the toy backend takes all but each block's Erf, so the graph splits."""
    nodes, inits = [], [const("c", np.full([1, width], 0.5, np.float32))]
    h = "x"
    for i in range(blocks):
        nodes += [
            helper.make_node("Relu", [h], [f"a{i}"], name=f"relu{i}"),
            helper.make_node("Mul", [f"a{i}", "c"], [f"b{i}"], name=f"mul{i}"),
            helper.make_node("Sigmoid", [f"b{i}"], [f"s{i}"], name=f"sigmoid{i}"),
            helper.make_node("Add", [f"s{i}", h], [f"d{i}"], name=f"add{i}"),
            helper.make_node("Erf", [f"d{i}"], [f"f{i}"], name=f"erf{i}"),
            helper.make_node("Relu", [f"f{i}"], [f"g{i}"], name=f"relu_b{i}"),
            helper.make_node("Add", [f"g{i}", f"f{i}"], [f"h{i}"], name=f"add_b{i}"),
        ]
        h = f"h{i}"
    nodes.append(helper.make_node("Identity", [h], ["y"], name="out"))
    path = folder / name
    path.write_bytes(make_model(nodes, [tensor("x", [1, width])], [tensor("y", [1, width])], inits).SerializeToString())
    return path


# --------------------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------------------
def _random_dag(rng, count, extra):
    edges = {(i - 1, i) for i in range(1, count)}
    for _ in range(extra):
        a, b = sorted(rng.choice(count, 2, replace=False))
        edges.add((int(a), int(b)))
    return sorted(edges)


@pytest.mark.parametrize("seed", range(5))
def test_layout_puts_every_edge_downwards_and_nodes_apart(seed):
    rng = np.random.default_rng(seed)
    count = int(rng.integers(2, 300))
    edges = _random_dag(rng, count, count // 2)
    layer, x = html.layered_layout(count, edges)
    assert all(layer[a] < layer[b] for a, b in edges)
    by_layer: dict[int, list[float]] = {}
    for v in range(count):
        by_layer.setdefault(layer[v], []).append(x[v])
    for xs in by_layer.values():
        xs.sort()
        assert all(b - a >= 0.99 for a, b in zip(xs, xs[1:], strict=False))
    assert min(x) == 0


def test_layout_of_a_chain_is_a_straight_line():
    layer, x = html.layered_layout(6, [(i, i + 1) for i in range(5)])
    assert layer == [0, 1, 2, 3, 4, 5]
    assert len(set(x)) == 1


def test_layout_centers_a_join_under_its_branches():
    # 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3: the diamond
    layer, x = html.layered_layout(4, [(0, 1), (0, 2), (1, 3), (2, 3)])
    assert layer == [0, 1, 1, 2]
    assert abs(x[1] - x[2]) == pytest.approx(1)
    assert x[3] == pytest.approx((x[1] + x[2]) / 2)
    assert x[0] == pytest.approx(x[3])


def test_layout_survives_a_cycle():
    layer, x = html.layered_layout(3, [(0, 1), (1, 2), (2, 0)])
    assert len(layer) == len(x) == 3


def test_place_is_least_squares_under_the_gap():
    assert html.place([0, 0, 0]) == [-1, 0, 1]
    assert html.place([0, 5]) == [0, 5]
    assert html.place([3, 0]) == pytest.approx([1, 2])


def test_layout_of_10000_items_is_still_layered():
    rng = np.random.default_rng(0)
    edges = _random_dag(rng, 10_000, 3_000)
    layer, x = html.layered_layout(10_000, edges)
    assert all(layer[a] < layer[b] for a, b in edges)
    assert len(set(zip(layer, x, strict=True))) == 10_000  # (no two items drawn in one place)


def test_chains_need_single_links_and_one_placement():
    # 0 -> 1 -> 2 -> 3 with 3 in another place; 4 -> 5 -> 6 where 5 also feeds 7
    edges = [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (5, 7)]
    signature = ["a", "a", "a", "b", "a", "a", "a", "a"]
    assert html.find_chains(8, edges, signature) == [[0, 1, 2]]
    assert html.find_chains(8, edges, signature, min_length=2) == [[0, 1, 2], [4, 5]]
    # items beyond the signature (graph inputs/outputs) never join a chain
    assert html.find_chains(4, [(3, 0), (0, 1), (1, 2)], ["a", "a", "a"]) == [[0, 1, 2]]


# --------------------------------------------------------------------------------------------------
# Report data
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def split_report(tmp_path, plugins):
    path = split_model(tmp_path, blocks=4)
    with nodegraph.recording():
        return api.check(path, ["toy", "other"], plugins=plugins)


def test_reports_carry_graphs_only_when_recording(tmp_path, plugins):
    path = split_model(tmp_path, blocks=1)
    plain = api.check(path, ["toy"], plugins=plugins)
    assert plain.backends["toy"].graph is None and plain.after_convert["toy"].graph is None
    assert '"graph":' not in json.dumps(plain.as_dict())
    with pytest.raises(html.MissingGraphError, match="recording"):
        html.render(plain)
    with nodegraph.recording():
        recorded = api.check(path, ["toy"], plugins=plugins)
    assert recorded.as_dict().keys() == plain.as_dict().keys()
    snapshot = recorded.backends["toy"].graph
    assert len(snapshot) == recorded.nodes
    assert snapshot.types["x"] == "float[1,8]"
    assert [n.op for n in snapshot.nodes][:3] == ["Relu", "Mul", "Sigmoid"]


def test_views_place_nodes_as_the_reports_say(split_report):
    data = html.report_data(split_report)
    views = {v["id"]: v for v in data["views"]}
    assert set(views) == {"asis:toy", "after:toy", "asis:other", "after:other", "combined"}
    assert data["pairs"][0] == ["asis:toy", "after:toy"]
    toy = split_report.backends["toy"]
    graph = data["graphs"]["asis"]
    view = views["asis:toy"]
    for pid, partition in enumerate(toy.partitions):
        for name in partition.nodes:
            assert view["place"][graph["names"].index(name)] == pid
    for item in toy.unsupported:
        i = graph["names"].index(item.node)
        assert view["place"][i] == -1
        assert view["reasons"][str(i)] == item.reason
    combined = views["combined"]
    assert {p["backend"] for p in combined["parts"]} <= {"toy", "other"}
    assert sum(p["size"] for p in combined["parts"]) == sum(v for k, v in split_report.combined.placement.items()
                                                            if k != "cpu")
    layout = graph["layout"]
    items = len(graph["names"]) + len(graph["io"])
    assert len(layout["layer"]) == len(layout["x"]) == items
    assert graph["io"][0][0] == "in" and graph["io"][-1][0] == "out"


def test_page_is_self_contained(split_report):
    page = html.render(split_report)
    assert page.startswith("<!DOCTYPE html>")
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:)?//""", page)
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page
    data = re.search(r"<script id='mobile-ep-data' type='application/json'>(.*?)</script>", page, re.S).group(1)
    assert json.loads(data)["model"] == split_report.model


def test_hostile_names_cannot_break_out_of_the_page(tmp_path, plugins):
    evil = "</script><script>alert(1)</script><!--"
    model = make_model([helper.make_node("Relu", ["x"], [evil], name=evil),
                        helper.make_node("Erf", [evil], ["y"], name="e&<>'\"")],
                       [tensor("x", [1, 4])], [tensor("y", [1, 4])])
    path = tmp_path / "evil.onnx"
    path.write_bytes(model.SerializeToString())
    with nodegraph.recording():
        report = api.check(path, ["toy"], plugins=plugins)
    page = html.render(report)
    assert page.count("</script>") == 3  # the data, the layout library and the code, nothing else
    assert "<script>alert" not in page
    data = re.search(r"<script id='mobile-ep-data' type='application/json'>(.*?)</script>", page, re.S).group(1)
    assert evil in json.loads(data)["graphs"]["asis"]["names"]


def test_convert_report_has_before_and_converted(tmp_path, plugins):
    path = split_model(tmp_path, blocks=2)
    with nodegraph.recording():
        report = api.convert(path, "toy", tmp_path / "out", plugins=plugins, verify=False)
    data = html.report_data(report)
    assert [v["id"] for v in data["views"]] == ["before", "converted"]
    assert data["pairs"] == [["before", "converted"]]
    page = html.render(report)
    assert "Verification skipped" in page and "converted" in page


def test_large_graph_collapses_chains(tmp_path, plugins):
    path = split_model(tmp_path, blocks=30)
    with nodegraph.recording():
        report = api.check(path, ["toy"], plugins=plugins, after_convert=False)
    data = html.report_data(report)
    collapsed = data["graphs"]["asis"]["layout"]["collapsed"]
    assert len(collapsed["chains"]) == 30  # Relu -> Mul -> Sigmoid in every block
    assert all(len(c) == 3 for c in collapsed["chains"])
    assert len(collapsed["items"]) == len(data["graphs"]["asis"]["layout"]["layer"]) - 2 * 30


# --------------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------------
def test_check_html_option(tmp_path, plugins):
    path = split_model(tmp_path, blocks=2)
    out = tmp_path / "r" / "report.html"
    result = CliRunner().invoke(main, ["check", str(path), "--ep", "toy", "--html", str(out)], obj=plugins)
    assert result.exit_code == 0, result.output
    assert out.exists() and "mobile-ep-data" in out.read_text()
    assert f"wrote {out}" in result.stderr


def test_convert_html_option_and_json_stay_unchanged(tmp_path, plugins):
    path = split_model(tmp_path, blocks=2)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["convert", str(path), "--ep", "toy", "-o", str(out), "--no-verify",
                                       "--html", str(out / "report.html"), "--json"], obj=plugins)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert "graph" not in data["partitioning"]
    assert (out / "report.html").exists()


@pytest.mark.skipif(not has_backend("nnapi"), reason="needs the NNAPI backend")
def test_light_model_report_without_browser(tmp_path):
    with nodegraph.recording():
        report = api.check(LIGHT_DIR / "light_squeezenet.onnx", ["nnapi"])
    page = html.render(report)
    data = json.loads(re.search(r"type='application/json'>(.*?)</script>", page, re.S).group(1))
    assert len(data["graphs"]["asis"]["names"]) == report.nodes


def test_page_order_and_cpu_nodes_grouped_by_cause(tmp_path, plugins):
    """Summary, then the graph, then the details collapsed; the nodes left on CPU one row per cause."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Sigmoid", ["a"], ["b"], name="sig"),
             helper.make_node("Erf", ["b"], ["y"], name="erf")]
    path = tmp_path / "dyn.onnx"
    path.write_bytes(make_model(nodes, [tensor("x", ["N", 4])], [tensor("y", ["N", 4])]).SerializeToString())
    with nodegraph.recording():
        report = api.check(path, ["toy"], plugins=plugins)
    page = html.render(report)
    assert page.index("id='summary'") < page.index("id='graphs'") < page.index("id='tables'")
    assert "<details open" not in page and "<details class='backend' open" not in page
    tables = page[page.index("id='tables'"):]
    rows = re.findall(r"<tr><td class='num'>(\d+)</td><td>([^<]*)</td>", tables)
    assert ("2", "dynamic shapes (Relu, Sigmoid): fix them with --shape x=1,4") in rows
    assert ("1", "toy has no rule for Erf") in rows
