/* mobile-ep HTML report: draws the partitioned graph on canvases.  Inline in the page; no network.
 *
 * The data (graphs, views = placements of a graph's nodes by one backend or all of them) is in
 * <script id="mobile-ep-data">.  Graphs are laid out with dagre (inlined before this script: a layered
 * layout that keeps chains vertical, edges routed around nodes), top to bottom; a graph of more than
 * DAGRE_MAX drawn items uses the layered layout computed by mobile_ep.reports.html instead, its layers
 * wrapped into columns to fit the panel.  window.mobileEp.stats() reports what was drawn (for tests).
 */
(function () {
  "use strict";

  var errors = [];
  window.addEventListener("error", function (e) {
    errors.push(String(e.message || e));
    document.body.setAttribute("data-errors", String(errors.length));
  });

  var DATA = JSON.parse(document.getElementById("mobile-ep-data").textContent);
  var NODE_W = 150, NODE_H = 40, IO_W = 124, IO_H = 24, SLOT = 180, ROW = 74, COL_GAP = 120, MARGIN = 40;
  var CPU_FILL = "#f6aea9", CPU_STROKE = "#a50e0e", EDGE = "#80868b", BOUNDARY = "#d93025";
  var BASE_HUE = { nnapi: 140, coreml: 214, example: 280 };
  var HUE_STEPS = [0, 26, -20, 46, -38, 12, -8, 34];
  var LIGHT_STEPS = [0, -7, 6, -12, 10];

  var DAGRE = typeof dagre !== "undefined" ? dagre : null, DAGRE_MAX = 2000, dagreCache = {};

  /* Positions (node centres) and edge routes of *items* by dagre, cached per graph and collapse state. */
  function dagreLayout(key, items, edges, nNodes, nItems, chainOf) {
    if (dagreCache[key]) return dagreCache[key];
    var g = new DAGRE.graphlib.Graph();
    g.setGraph({ rankdir: "TB", nodesep: 26, ranksep: 30, edgesep: 10, marginx: MARGIN, marginy: MARGIN });
    g.setDefaultEdgeLabel(function () { return {}; });
    var i, it;
    for (i = 0; i < items.length; i++) {
      it = items[i];
      var stack = chainOf && chainOf[it] ? 6 : 0;
      g.setNode(String(it), it < nNodes ? { width: NODE_W + stack, height: NODE_H + stack } : { width: IO_W, height: IO_H });
    }
    for (i = 0; i < edges.length; i += 2) g.setEdge(String(edges[i]), String(edges[i + 1]));
    DAGRE.layout(g);
    var px = new Float64Array(nItems).fill(NaN), py = new Float64Array(nItems).fill(NaN), routes = new Map();
    for (i = 0; i < items.length; i++) {
      var n = g.node(String(items[i]));
      px[items[i]] = n.x; py[items[i]] = n.y;
    }
    for (i = 0; i < edges.length; i += 2) {
      var e = g.edge(String(edges[i]), String(edges[i + 1]));
      if (e && e.points && e.points.length > 2) routes.set(edges[i] * nItems + edges[i + 1], e.points);
    }
    return (dagreCache[key] = { px: px, py: py, routes: routes });
  }

  var viewsById = {};
  DATA.views.forEach(function (v) { viewsById[v.id] = v; });

  // ------------------------------------------------------------------------------------------------
  // Colours
  // ------------------------------------------------------------------------------------------------
  function hueOf(backend) {
    if (backend in BASE_HUE) return BASE_HUE[backend];
    var h = 0;
    for (var i = 0; i < backend.length; i++) h = (h * 31 + backend.charCodeAt(i)) >>> 0;
    return 40 + (h % 280); // never the reds used for CPU
  }
  function partColors(view, pid) {
    var part = view.parts[pid];
    var same = 0; // index of this partition among those of its backend
    for (var i = 0; i < pid; i++) if (view.parts[i].backend === part.backend) same++;
    var hue = hueOf(part.backend) + HUE_STEPS[same % HUE_STEPS.length];
    var l = LIGHT_STEPS[Math.floor(same / HUE_STEPS.length) % LIGHT_STEPS.length];
    var rejected = part.kept === false;
    return {
      fill: "hsl(" + hue + "," + (rejected ? 42 : 62) + "%," + (rejected ? 88 : 80 + l / 2) + "%)",
      stroke: "hsl(" + hue + "," + (rejected ? 40 : 60) + "%," + (30 + l) + "%)",
      halo: "hsl(" + hue + "," + (rejected ? 45 : 70) + "%," + (92 + l / 3) + "%)",
      text: "hsl(" + hue + ",60%,18%)"
    };
  }
  document.querySelectorAll(".swatch[data-backend]").forEach(function (el) {
    var h = hueOf(el.getAttribute("data-backend"));
    el.style.background = "hsl(" + h + ",62%,70%)";
  });

  // ------------------------------------------------------------------------------------------------
  // Graph helpers
  // ------------------------------------------------------------------------------------------------
  function graphInfo(gid) {
    var g = DATA.graphs[gid];
    if (!g._index) {
      g._index = {};
      for (var i = 0; i < g.names.length; i++) g._index[g.names[i]] = i;
      g._items = g.names.length + g.io.length;
    }
    return g;
  }
  function valueText(g, v) {
    if (v < 0) return "(omitted)";
    var val = g.values[v];
    return val[0] + (val[1] ? "  " + val[1] : "") + (val[2] ? "  (constant)" : "");
  }
  function shapeOf(g, item) {
    var n = g.names.length;
    var v = item < n ? g.outs[item][0] : g.io[item - n][1];
    if (v === undefined || v < 0) return "";
    var t = g.values[v][1];
    return t || "";
  }
  function itemLabel(g, item) {
    var n = g.names.length;
    if (item < n) return g.ops[item];
    var io = g.io[item - n];
    return (io[0] === "in" ? "input " : "output ") + g.values[io[1]][0];
  }
  function describePlacement(view, node) {
    var pid = view.place[node];
    if (pid >= 0) {
      var p = view.parts[pid];
      var same = 0, total = 0;
      for (var i = 0; i < view.parts.length; i++) {
        if (view.parts[i].backend === p.backend) { total++; if (i < pid) same++; }
      }
      var text = p.backend + ": partition " + (same + 1) + " of " + total + " (" + p.size + " nodes)";
      if (p.kept === false) text += " — the cost model would not keep it: " + (p.note || "");
      return { cpu: false, text: text };
    }
    var reason = view.reasons[String(node)];
    return { cpu: true, text: "CPU" + (reason ? " — " + reason : "") };
  }

  // ------------------------------------------------------------------------------------------------
  // Panels
  // ------------------------------------------------------------------------------------------------
  var panels = [];
  var selection = null; // {gid, node (index), name}
  var highlighted = {}; // gid -> set of item indices to outline

  function Panel(root, side) {
    this.side = side;
    this.root = root;
    root.className = "panel";
    root.innerHTML = "<div class='panel-head'><select aria-label='view'></select>" +
      " <label><input type='checkbox' class='collapse'> collapse chains</label>" +
      " <button type='button' class='fit'>fit</button><span class='stats dim'></span>" +
      "<div class='legend'></div></div><div class='canvas-box'><canvas></canvas><div class='tooltip'></div></div>";
    this.select = root.querySelector("select");
    this.collapse = root.querySelector("input.collapse");
    this.canvas = root.querySelector("canvas");
    this.tooltip = root.querySelector(".tooltip");
    this.stats = root.querySelector(".stats");
    this.legend = root.querySelector(".legend");
    this.ctx = this.canvas.getContext("2d");
    this.s = 1; this.tx = 0; this.ty = 0;
    var self = this;
    DATA.views.forEach(function (v) {
      var o = document.createElement("option");
      o.value = v.id; o.textContent = v.label;
      self.select.appendChild(o);
    });
    this.select.addEventListener("change", function () { self.setView(self.select.value); });
    this.collapse.addEventListener("change", function () { self.collapsed = self.collapse.checked; self.rebuild(true); });
    root.querySelector("button.fit").addEventListener("click", function () { self.fit(); self.draw(); });
    this.bindMouse();
  }

  Panel.prototype.setView = function (id) {
    this.view = viewsById[id];
    this.select.value = id;
    var g = graphInfo(this.view.graph);
    this.gid = this.view.graph;
    this.g = g;
    this.collapsed = Boolean(g.layout.collapsed) && g.names.length > DATA.collapseAbove;
    this.collapse.checked = this.collapsed;
    this.collapse.disabled = !g.layout.collapsed;
    this.rebuild(true);
    this.renderLegend();
  };

  Panel.prototype.size = function () {
    var r = this.canvas.parentNode.getBoundingClientRect();
    return { w: Math.max(50, r.width), h: Math.max(50, r.height) };
  };

  /* Positions of the drawn items: dagre's layout, or (large graphs) the precomputed layers wrapped into
   * columns that best fit the panel. */
  Panel.prototype.rebuild = function (refit) {
    var g = this.g, lay = g.layout, nItems = g._items, nNodes = g.names.length;
    var items, layer, xs, chainOf = null;
    var rep = new Int32Array(nItems);
    for (var i = 0; i < nItems; i++) rep[i] = i;
    if (this.collapsed && lay.collapsed) {
      var c = lay.collapsed;
      items = c.items; layer = c.layer; xs = c.x;
      chainOf = {};
      c.chains.forEach(function (chain) {
        chainOf[chain[0]] = chain;
        for (var k = 1; k < chain.length; k++) rep[chain[k]] = chain[0];
      });
    } else {
      items = new Array(nItems);
      for (i = 0; i < nItems; i++) items[i] = i;
      layer = lay.layer; xs = lay.x;
    }
    // Edges between drawn items (chain members map to their chain's box).
    var e = lay.edges, seen = new Set(), edges = [];
    for (i = 0; i < e.length; i += 2) {
      var ea = rep[e[i]], eb = rep[e[i + 1]];
      if (ea === eb) continue;
      var ekey = ea * nItems + eb;
      if (seen.has(ekey)) continue;
      seen.add(ekey);
      edges.push(ea, eb);
    }
    this.items = items; this.rep = rep; this.chainOf = chainOf; this.edges = edges; this.nNodes = nNodes;
    if (DAGRE && items.length <= DAGRE_MAX) {
      var laid = dagreLayout(this.gid + (chainOf ? ":collapsed" : ""), items, edges, nNodes, nItems, chainOf);
      this.px = laid.px; this.py = laid.py; this.routes = laid.routes;
      this.col = new Int32Array(nItems);
      this.layoutName = "dagre";
      this.finishLayout(refit);
      return;
    }
    this.routes = null;
    this.layoutName = "columns";
    var nLayers = 0;
    for (i = 0; i < items.length; i++) nLayers = Math.max(nLayers, layer[i] + 1);
    var lmin = new Float64Array(nLayers).fill(Infinity), lmax = new Float64Array(nLayers).fill(-Infinity);
    for (i = 0; i < items.length; i++) {
      var l = layer[i];
      if (xs[i] < lmin[l]) lmin[l] = xs[i];
      if (xs[i] > lmax[l]) lmax[l] = xs[i];
    }
    var size = this.size();
    var best = null;
    var maxCols = Math.min(nLayers, 400);
    for (var cols = 1; cols <= maxCols; cols++) {
      var per = Math.ceil(nLayers / cols);
      if (cols > 1 && Math.ceil(nLayers / (cols - 1)) === per) continue;
      var width = 0, used = Math.ceil(nLayers / per);
      for (var col = 0; col < used; col++) {
        var lo = Infinity, hi = -Infinity;
        for (l = col * per; l < Math.min(nLayers, (col + 1) * per); l++) {
          if (lmin[l] < lo) lo = lmin[l];
          if (lmax[l] > hi) hi = lmax[l];
        }
        width += (hi - lo) * SLOT + NODE_W;
      }
      width += (used - 1) * COL_GAP + 2 * MARGIN;
      var height = (per - 1) * ROW + NODE_H + 2 * MARGIN;
      var scale = Math.min(1, size.w / width, size.h / height);
      if (!best || scale > best.scale * 1.04) best = { scale: scale, per: per, cols: used };
    }
    var per2 = best ? best.per : 1, ncols = best ? best.cols : 1;
    var colMin = new Float64Array(ncols).fill(Infinity), colMax = new Float64Array(ncols).fill(-Infinity);
    for (l = 0; l < nLayers; l++) {
      var cc = Math.floor(l / per2);
      if (lmin[l] < colMin[cc]) colMin[cc] = lmin[l];
      if (lmax[l] > colMax[cc]) colMax[cc] = lmax[l];
    }
    var colOff = new Float64Array(ncols), off = MARGIN;
    for (cc = 0; cc < ncols; cc++) {
      colOff[cc] = off;
      off += (isFinite(colMax[cc]) ? (colMax[cc] - colMin[cc]) * SLOT : 0) + NODE_W + COL_GAP;
    }
    var px = new Float64Array(nItems).fill(NaN), py = new Float64Array(nItems).fill(NaN);
    var col = new Int32Array(nItems).fill(-1);
    for (i = 0; i < items.length; i++) {
      var it = items[i], li = layer[i], ci = Math.floor(li / per2);
      px[it] = colOff[ci] + (xs[i] - colMin[ci]) * SLOT + NODE_W / 2;
      py[it] = MARGIN + (li - ci * per2) * ROW + NODE_H / 2;
      col[it] = ci;
    }
    this.px = px; this.py = py; this.col = col;
    this.finishLayout(refit);
  };

  Panel.prototype.finishLayout = function (refit) {
    var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    for (var i = 0; i < this.items.length; i++) {
      var it = this.items[i], x = this.px[it], y = this.py[it];
      minX = Math.min(minX, x - NODE_W / 2); maxX = Math.max(maxX, x + NODE_W / 2);
      minY = Math.min(minY, y - NODE_H / 2); maxY = Math.max(maxY, y + NODE_H / 2);
    }
    this.bbox = { x0: minX - MARGIN, y0: minY - MARGIN, x1: maxX + MARGIN, y1: maxY + MARGIN };
    this.buildGrid();
    if (refit) this.fitStart();
    this.draw();
  };

  Panel.prototype.buildGrid = function () {
    var grid = new Map(), cell = 200;
    for (var i = 0; i < this.items.length; i++) {
      var it = this.items[i];
      var key = Math.floor(this.px[it] / cell) + "," + Math.floor(this.py[it] / cell);
      var list = grid.get(key);
      if (!list) grid.set(key, list = []);
      list.push(it);
    }
    this.grid = grid; this.cell = cell;
  };

  Panel.prototype.hit = function (wx, wy) {
    var cx = Math.floor(wx / this.cell), cy = Math.floor(wy / this.cell);
    for (var dx = -1; dx <= 1; dx++) for (var dy = -1; dy <= 1; dy++) {
      var list = this.grid.get((cx + dx) + "," + (cy + dy));
      if (!list) continue;
      for (var k = 0; k < list.length; k++) {
        var it = list[k], w = it < this.nNodes ? NODE_W : IO_W, h = it < this.nNodes ? NODE_H : IO_H;
        if (Math.abs(wx - this.px[it]) <= w / 2 && Math.abs(wy - this.py[it]) <= h / 2) return it;
      }
    }
    return -1;
  };

  /* The item drawn at a point of the page (client coordinates, as mouse events give them), or -1. */
  Panel.prototype.itemAt = function (clientX, clientY) {
    var r = this.canvas.getBoundingClientRect();
    return this.hit((clientX - r.left - this.tx) / this.s, (clientY - r.top - this.ty) / this.s);
  };

  /* Where item *it* is drawn, in client coordinates (its centre, as the last draw placed it). */
  Panel.prototype.pointOf = function (it) {
    var r = this.canvas.getBoundingClientRect();
    return { x: r.left + this.px[it] * this.s + this.tx, y: r.top + this.py[it] * this.s + this.ty };
  };

  /* The first view: the whole graph when it is legible so, else its top (the inputs) as wide as the panel
   * allows, from where the graph is read downwards. */
  Panel.prototype.fitStart = function () {
    this.fit();
    if (this.layoutName !== "dagre" || NODE_H * this.s >= 12) return;
    var size = this.size(), b = this.bbox, width = b.x1 - b.x0;
    this.s = Math.max(this.s, Math.min(0.6, Math.max(0.3, size.w / width)));
    this.tx = width * this.s <= size.w ? (size.w - width * this.s) / 2 - b.x0 * this.s : -b.x0 * this.s;
    this.ty = -b.y0 * this.s;
  };

  Panel.prototype.fit = function () {
    var size = this.size(), b = this.bbox;
    var s = Math.min(size.w / (b.x1 - b.x0), size.h / (b.y1 - b.y0));
    this.s = Math.min(s, 1.5);
    this.tx = (size.w - (b.x1 - b.x0) * this.s) / 2 - b.x0 * this.s;
    this.ty = (size.h - (b.y1 - b.y0) * this.s) / 2 - b.y0 * this.s;
  };

  Panel.prototype.centerOn = function (items) {
    if (!items.length) return;
    var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity, self = this;
    items.forEach(function (raw) {
      var it = self.rep[raw];
      if (isNaN(self.px[it])) return;
      x0 = Math.min(x0, self.px[it] - NODE_W); x1 = Math.max(x1, self.px[it] + NODE_W);
      y0 = Math.min(y0, self.py[it] - NODE_H * 2); y1 = Math.max(y1, self.py[it] + NODE_H * 2);
    });
    if (!isFinite(x0)) return;
    var size = this.size();
    var s = Math.min(size.w / (x1 - x0), size.h / (y1 - y0), 1.2);
    this.s = Math.max(s, Math.min(this.s, 1.2), 0.35);
    this.tx = size.w / 2 - (x0 + x1) / 2 * this.s;
    this.ty = size.h / 2 - (y0 + y1) / 2 * this.s;
    this.draw();
  };

  Panel.prototype.placeOf = function (it) {
    return it < this.nNodes ? this.view.place[it] : -2;
  };

  Panel.prototype.edgePath = function (path, a, b) {
    var route = this.routes && this.routes.get(a * this.g._items + b);
    if (route) {  // dagre's route around the nodes in between: a smooth curve through its bends
      path.moveTo(route[0].x, route[0].y);
      for (var k = 1; k < route.length - 1; k++) {
        path.quadraticCurveTo(route[k].x, route[k].y, (route[k].x + route[k + 1].x) / 2, (route[k].y + route[k + 1].y) / 2);
      }
      path.lineTo(route[route.length - 1].x, route[route.length - 1].y);
      return;
    }
    var ax = this.px[a], ay = this.py[a] + (a < this.nNodes ? NODE_H : IO_H) / 2;
    var bx = this.px[b], by = this.py[b] - (b < this.nNodes ? NODE_H : IO_H) / 2;
    var dy = Math.max(24, Math.min(80, Math.abs(by - ay) / 2));
    path.moveTo(ax, ay);
    if (by - ay > ROW * 1.5 && Math.abs(bx - ax) < NODE_W && this.col[a] === this.col[b]) {
      // A long edge down a column would run over the nodes in between: swing it out to one side.
      var side = (a + b) % 2 ? 1 : -1, out = side * NODE_W * 0.72;
      path.bezierCurveTo(ax + out, ay + dy, bx + out, by - dy, bx, by);
      return;
    }
    path.bezierCurveTo(ax, ay + dy, bx, by - dy, bx, by);
  };

  Panel.prototype.draw = function () {
    if (this.pending) return;
    this.drawNow();
  };

  Panel.prototype.requestDraw = function () {
    var self = this;
    if (this.pending) return;
    this.pending = true;
    window.requestAnimationFrame(function () { self.pending = false; self.drawNow(); });
  };

  Panel.prototype.drawNow = function () {
    var size = this.size(), dpr = window.devicePixelRatio || 1, canvas = this.canvas, ctx = this.ctx;
    var w = Math.round(size.w * dpr), h = Math.round(size.h * dpr);
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = "#fafafa";
    ctx.fillRect(0, 0, w, h);
    var s = this.s;
    ctx.setTransform(dpr * s, 0, 0, dpr * s, dpr * this.tx, dpr * this.ty);
    // The visible world rectangle, for culling.
    var vx0 = -this.tx / s - NODE_W, vy0 = -this.ty / s - NODE_H;
    var vx1 = (size.w - this.tx) / s + NODE_W, vy1 = (size.h - this.ty) / s + NODE_H;
    var px = this.px, py = this.py, col = this.col, view = this.view, nNodes = this.nNodes, self = this;
    function visible(it) { return px[it] >= vx0 && px[it] <= vx1 && py[it] >= vy0 && py[it] <= vy1; }

    // 1. partition halos: a light band along the partition's own edges and around its nodes
    var halos = {}, edges = this.edges, i, a, b, pa, pb;
    function haloPath(pid) { return halos[pid] || (halos[pid] = { edges: new Path2D(), nodes: new Path2D() }); }
    for (i = 0; i < edges.length; i += 2) {
      a = edges[i]; b = edges[i + 1];
      pa = this.placeOf(a); pb = this.placeOf(b);
      if (pa >= 0 && pa === pb && col[a] === col[b] && (visible(a) || visible(b))) this.edgePath(haloPath(pa).edges, a, b);
    }
    var items = this.items;
    for (i = 0; i < items.length; i++) {
      var it = items[i];
      if (it >= nNodes || !visible(it)) continue;
      var pid = view.place[it];
      if (pid >= 0) haloPath(pid).nodes.rect(px[it] - NODE_W / 2 - 14, py[it] - NODE_H / 2 - 12, NODE_W + 28, NODE_H + 24);
    }
    ctx.lineCap = "round"; ctx.lineJoin = "round";
    Object.keys(halos).forEach(function (pid) {
      var c = partColors(view, +pid);
      ctx.strokeStyle = c.halo; ctx.lineWidth = 34; ctx.stroke(halos[pid].edges);
      ctx.fillStyle = c.halo; ctx.fill(halos[pid].nodes);
    });

    // 2. edges: within a place, across columns (faint), across a partition boundary (red: a copy)
    var plain = new Path2D(), far = new Path2D(), boundary = new Path2D();
    for (i = 0; i < edges.length; i += 2) {
      a = edges[i]; b = edges[i + 1];
      if (!visible(a) && !visible(b) && !(col[a] !== col[b])) continue;
      pa = this.placeOf(a); pb = this.placeOf(b);
      var crossing = a < nNodes && b < nNodes && pa !== pb;
      this.edgePath(crossing ? boundary : (col[a] !== col[b] ? far : plain), a, b);
    }
    ctx.lineWidth = Math.max(1, 1.2 / Math.sqrt(s));
    ctx.strokeStyle = EDGE; ctx.globalAlpha = 0.9; ctx.stroke(plain);
    ctx.globalAlpha = 0.28; ctx.stroke(far);
    ctx.globalAlpha = 1; ctx.strokeStyle = BOUNDARY; ctx.lineWidth = Math.max(2.5, 2.5 / Math.sqrt(s));
    ctx.setLineDash([8, 5]); ctx.stroke(boundary); ctx.setLineDash([]);

    // 3. nodes, batched by colour
    var groups = {}, drawn = 0, drawnItems = 0;
    function group(key, fill, stroke) { return groups[key] || (groups[key] = { fill: fill, stroke: stroke, path: new Path2D(), stack: new Path2D() }); }
    for (i = 0; i < items.length; i++) {
      it = items[i];
      if (!visible(it)) continue;
      drawnItems++;
      var grp, wdt = NODE_W, hgt = NODE_H;
      if (it >= nNodes) {
        grp = group("io", "#ffffff", "#5f6368"); wdt = IO_W; hgt = IO_H;
      } else {
        pid = view.place[it];
        if (pid >= 0) { var pc = partColors(view, pid); grp = group("p" + pid, pc.fill, pc.stroke); }
        else grp = group("cpu", CPU_FILL, CPU_STROKE);
        var chain = this.chainOf && this.chainOf[it];
        drawn += chain ? chain.length : 1;
        if (chain) grp.stack.rect(px[it] - wdt / 2 + 6, py[it] - hgt / 2 - 6, wdt, hgt);
      }
      grp.path.rect(px[it] - wdt / 2, py[it] - hgt / 2, wdt, hgt);
    }
    ctx.lineWidth = Math.max(1.2, 1.2 / Math.sqrt(s));
    Object.keys(groups).forEach(function (key) {
      var gr = groups[key];
      ctx.fillStyle = gr.fill; ctx.strokeStyle = gr.stroke;
      ctx.lineWidth = key === "cpu" ? Math.max(2.4, 2.4 / Math.sqrt(s)) : Math.max(1.2, 1.2 / Math.sqrt(s));
      ctx.fill(gr.stack); ctx.stroke(gr.stack);
      ctx.fill(gr.path); ctx.stroke(gr.path);
    });

    // 4. highlights: the selection and its counterparts, search hits
    var marks = highlighted[this.gid];
    if (marks && marks.size) {
      ctx.strokeStyle = "#1a73e8"; ctx.lineWidth = Math.max(3, 3 / s);
      var hp = new Path2D();
      marks.forEach(function (raw) {
        var r = self.rep[raw];
        if (!isNaN(px[r])) hp.rect(px[r] - NODE_W / 2 - 5, py[r] - NODE_H / 2 - 5, NODE_W + 10, NODE_H + 10);
      });
      ctx.stroke(hp);
    }

    // 5. labels once they are legible: ops (and output shapes when there is room), in screen pixels
    var screenH = NODE_H * s;
    if (screenH >= 8) {
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.textAlign = "center"; ctx.textBaseline = "middle";
      var twoLines = screenH >= 30, font = Math.min(13, Math.floor(screenH * (twoLines ? 0.36 : 0.78)));
      var subFont = Math.min(11, Math.floor(screenH * 0.27));
      var boxChars = Math.max(2, Math.floor(NODE_W * s / (font * 0.58)));
      for (i = 0; i < items.length; i++) {
        it = items[i];
        if (!visible(it)) continue;
        var label, sub = "";
        if (it < nNodes) {
          chain = this.chainOf && this.chainOf[it];
          label = chain ? this.g.ops[chain[0]] + "→…→" + this.g.ops[chain[chain.length - 1]] + " ×" + chain.length
                        : this.g.ops[it];
          sub = chain ? "" : shapeOf(this.g, it);
          pid = view.place[it];
          ctx.fillStyle = pid >= 0 ? partColors(view, pid).text : "#5c0707";
        } else {
          label = itemLabel(this.g, it); sub = shapeOf(this.g, it);
          ctx.fillStyle = "#3c4043";
        }
        var chars = it < nNodes ? boxChars : Math.floor(boxChars * IO_W / NODE_W);
        if (label.length > chars) label = label.slice(0, Math.max(1, chars - 1)) + "…";
        var sx = px[it] * s + this.tx, sy = py[it] * s + this.ty;
        if (twoLines && sub && it < nNodes) {
          ctx.font = "600 " + font + "px system-ui, sans-serif"; ctx.fillText(label, sx, sy - screenH * 0.17);
          ctx.font = subFont + "px ui-monospace, Menlo, Consolas, monospace";
          var subChars = Math.floor(NODE_W * s / (subFont * 0.62));
          ctx.fillText(sub.length > subChars ? sub.slice(0, subChars - 1) + "…" : sub, sx, sy + screenH * 0.2);
        } else {
          ctx.font = "600 " + (it < nNodes ? font : Math.min(font, Math.floor(IO_H * s * 0.7))) + "px system-ui, sans-serif";
          ctx.fillText(label, sx, sy);
        }
      }
    }

    // 6. partition names, in screen space, over each partition's first node
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    if (view.parts.length && view.parts.length <= 80) {
      var first = {};
      for (i = 0; i < items.length; i++) {
        it = items[i];
        if (it < nNodes && view.place[it] >= 0 && !(view.place[it] in first)) first[view.place[it]] = it;
      }
      ctx.font = "600 12px system-ui, sans-serif"; ctx.textAlign = "left"; ctx.textBaseline = "middle";
      Object.keys(first).forEach(function (pidText) {
        var p = +pidText, at = first[p];
        var sx = (px[at] - NODE_W / 2) * s + self.tx + 2, sy = py[at] * s + self.ty;
        if (sx < -200 || sy < -20 || sx > size.w || sy > size.h + 20) return;
        var part = view.parts[p], c = partColors(view, p);
        var text = (view.backend ? "" : part.backend + " ") + "P" + (p + 1) + " · " + part.size;
        var tw = ctx.measureText(text).width;
        ctx.globalAlpha = 0.9; ctx.fillStyle = c.stroke; ctx.fillRect(sx - 2, sy - 8, tw + 10, 16); ctx.globalAlpha = 1;
        ctx.fillStyle = "#fff"; ctx.fillText(text, sx + 3, sy);
      });
    }
    ctx.setTransform(dpr * s, 0, 0, dpr * s, dpr * this.tx, dpr * this.ty);

    canvas.setAttribute("data-view", view.id);
    canvas.setAttribute("data-drawn-nodes", String(drawn));
    canvas.setAttribute("data-drawn-items", String(drawnItems));
    canvas.setAttribute("data-total-nodes", String(nNodes));
    this.drawn = drawn;
    var sm = view.summary;
    this.stats.textContent = nNodes + " nodes · " + sm.claimed + " claimed · " + sm.partitions + " partition" +
      (sm.partitions === 1 ? "" : "s") + (sm.verdict ? " · " + sm.verdict : "") +
      (this.collapsed ? " · chains collapsed" : "");
  };

  Panel.prototype.renderLegend = function () {
    var view = this.view, self = this, html = [];
    var counts = {};
    view.parts.forEach(function (p) { counts[p.backend] = (counts[p.backend] || 0) + 1; });
    var cpu = 0;
    for (var i = 0; i < view.place.length; i++) if (view.place[i] < 0) cpu++;
    this.legend.innerHTML = "";
    view.parts.slice(0, 200).forEach(function (p, pid) {
      var c = partColors(view, pid), el = document.createElement("span");
      el.className = "item" + (p.kept === false ? " rejected" : "");
      el.innerHTML = "<span class='swatch'></span>";
      el.firstChild.style.background = c.fill; el.firstChild.style.borderColor = c.stroke;
      el.appendChild(document.createTextNode(p.backend + " P" + (pid + 1) + " (" + p.size + ")"));
      el.title = (p.ops || "") + (p.note ? "\n" + p.note : "") +
        (p.kept === false ? "\nThe cost model would not keep this partition; ORT's EP still takes it." : "");
      el.addEventListener("click", function () {
        var members = [];
        for (var k = 0; k < view.place.length; k++) if (view.place[k] === pid) members.push(k);
        self.centerOn(members);
      });
      self.legend.appendChild(el);
    });
    if (view.parts.length > 200) self.legend.appendChild(document.createTextNode("… " + (view.parts.length - 200) + " more"));
    var el = document.createElement("span");
    el.className = "item";
    el.innerHTML = "<span class='swatch'></span>";
    el.firstChild.style.background = CPU_FILL; el.firstChild.style.borderColor = CPU_STROKE;
    el.appendChild(document.createTextNode("CPU (" + cpu + ")"));
    el.addEventListener("click", function () {
      var members = [];
      for (var k = 0; k < view.place.length; k++) if (view.place[k] < 0) members.push(k);
      self.centerOn(members.slice(0, 1));
    });
    this.legend.appendChild(el);
    var key = document.createElement("span");
    key.className = "dim";
    key.innerHTML = "<span style='color:" + BOUNDARY + "'>- - -</span> copy across a partition boundary";
    this.legend.appendChild(key);
  };

  Panel.prototype.bindMouse = function () {
    var self = this, canvas = this.canvas, drag = null;
    function local(e) { var r = canvas.getBoundingClientRect(); return { x: e.clientX - r.left, y: e.clientY - r.top }; }
    canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      var p = local(e), f = Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
      var ns = Math.min(4, Math.max(0.01, self.s * f));
      self.tx = p.x - (p.x - self.tx) * ns / self.s;
      self.ty = p.y - (p.y - self.ty) * ns / self.s;
      self.s = ns;
      self.requestDraw();
    }, { passive: false });
    canvas.addEventListener("pointerdown", function (e) {
      var p = local(e);
      drag = { x: p.x, y: p.y, tx: self.tx, ty: self.ty, moved: false };
      try { canvas.setPointerCapture(e.pointerId); } catch (err) { /* a pointer the browser does not track */ }
    });
    canvas.addEventListener("pointermove", function (e) {
      var p = local(e);
      if (drag) {
        if (Math.abs(p.x - drag.x) + Math.abs(p.y - drag.y) > 4) { drag.moved = true; canvas.classList.add("dragging"); }
        if (drag.moved) { self.tx = drag.tx + p.x - drag.x; self.ty = drag.ty + p.y - drag.y; self.requestDraw(); }
        return;
      }
      var it = self.itemAt(e.clientX, e.clientY);
      if (it < 0) { self.tooltip.style.display = "none"; return; }
      self.tooltip.textContent = self.tooltipText(it);
      self.tooltip.style.display = "block";
      var box = canvas.getBoundingClientRect();
      self.tooltip.style.left = Math.min(p.x + 14, box.width - 300) + "px";
      self.tooltip.style.top = Math.min(p.y + 14, box.height - 60) + "px";
    });
    canvas.addEventListener("pointerup", function (e) {
      canvas.classList.remove("dragging");
      if (drag && !drag.moved) {
        var it = self.itemAt(e.clientX, e.clientY);
        if (it >= 0 && it < self.nNodes) selectNode(self.gid, it, self);
      }
      drag = null;
    });
    canvas.addEventListener("pointerleave", function () { self.tooltip.style.display = "none"; });
    canvas.addEventListener("dblclick", function () { self.fit(); self.draw(); });
  };

  Panel.prototype.tooltipText = function (it) {
    var g = this.g;
    if (it >= this.nNodes) return itemLabel(g, it) + (shapeOf(g, it) ? "\n" + shapeOf(g, it) : "");
    var chain = this.chainOf && this.chainOf[it];
    var lines = [];
    if (chain) {
      lines.push(chain.length + " nodes in a chain (uncheck \"collapse chains\" to see each):");
      chain.slice(0, 12).forEach(function (k) { lines.push("  " + g.ops[k] + "  " + g.names[k]); });
      if (chain.length > 12) lines.push("  …");
    } else {
      lines.push(g.ops[it] + "  " + g.names[it]);
      var outs = g.outs[it].map(function (v) { return v >= 0 && g.values[v][1] ? g.values[v][1] : ""; }).filter(Boolean);
      if (outs.length) lines.push("→ " + outs.join(", "));
    }
    lines.push(describePlacement(this.view, it).text);
    return lines.join("\n");
  };

  // ------------------------------------------------------------------------------------------------
  // Selection and details
  // ------------------------------------------------------------------------------------------------
  function counterparts(gid, name) {
    // The same node in another graph, or the nodes a rewrite made from it (named "<node>/<rewrite>/...").
    var g = graphInfo(gid), found = [];
    if (name in g._index) return [g._index[name]];
    var prefix = name + "/";
    for (var i = 0; i < g.names.length; i++) if (g.names[i].lastIndexOf(prefix, 0) === 0) found.push(i);
    if (!found.length && name.indexOf("/") > 0) {
      var base = name.slice(0, name.indexOf("/"));
      if (base in g._index) found.push(g._index[base]);
    }
    return found;
  }

  function selectNode(gid, node, from, center) {
    var g = graphInfo(gid), name = g.names[node];
    selection = { gid: gid, node: node, name: name };
    highlighted = {};
    var seenGraphs = {};
    panels.forEach(function (p) {
      if (seenGraphs[p.gid]) return;
      seenGraphs[p.gid] = true;
      highlighted[p.gid] = new Set(p.gid === gid ? [node] : counterparts(p.gid, name));
    });
    panels.forEach(function (p) {
      var marks = highlighted[p.gid];
      if (center && marks && marks.size && !p.root.classList.contains("hidden")) p.centerOn(Array.from(marks));
      else p.draw();
    });
    showDetails(gid, node);
  }

  function showDetails(gid, node) {
    var g = graphInfo(gid), box = document.getElementById("details");
    box.classList.remove("dim");
    var esc = function (t) { var d = document.createElement("div"); d.textContent = t; return d.innerHTML; };
    var html = ["<h3>" + esc(g.ops[node]) + " <span class='dim'>" + esc(g.names[node]) + "</span></h3>"];
    if (g.attrs[node]) html.push("<p><code>" + esc(g.attrs[node]) + "</code></p>");
    DATA.views.forEach(function (v) {
      if (v.graph !== gid) return;
      var where = describePlacement(v, node);
      html.push("<div class='where" + (where.cpu ? " cpu" : "") + "'><b>" + esc(v.label) + "</b><br>" + esc(where.text) + "</div>");
    });
    var rows = function (list) {
      return list.map(function (v) { return "<tr><td>" + esc(valueText(g, v)) + "</td></tr>"; }).join("");
    };
    html.push("<h4>inputs</h4><table>" + rows(g.ins[node]) + "</table>");
    if (g.implicit.length && g.implicit[node].length) html.push("<h4>read by subgraphs</h4><table>" + rows(g.implicit[node]) + "</table>");
    html.push("<h4>outputs</h4><table>" + rows(g.outs[node]) + "</table>");
    html.push("<p>");
    panels.forEach(function (p, k) {
      if (p.root.classList.contains("hidden")) return;
      html.push("<button type='button' data-panel='" + k + "'>show in " + esc(p.view.label) + "</button>");
    });
    html.push("</p>");
    box.innerHTML = html.join("");
    box.querySelectorAll("button[data-panel]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var p = panels[+btn.getAttribute("data-panel")];
        var marks = highlighted[p.gid];
        if (marks && marks.size) p.centerOn(Array.from(marks));
      });
    });
  }

  function panelFor(gid) {
    for (var i = 0; i < panels.length; i++) if (panels[i].gid === gid && !panels[i].root.classList.contains("hidden")) return panels[i];
    for (i = 0; i < DATA.views.length; i++) {
      if (DATA.views[i].graph === gid) { panels[0].setView(DATA.views[i].id); return panels[0]; }
    }
    return null;
  }

  function selectByName(gid, name) {
    var p = panelFor(gid);
    if (!p) return;
    var g = graphInfo(gid);
    if (!(name in g._index)) return;
    selectNode(gid, g._index[name], p, true);
    document.getElementById("graphs").scrollIntoView({ behavior: "smooth", block: "start" });
  }

  document.querySelectorAll("a.node-link").forEach(function (a) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      selectByName(a.getAttribute("data-graph"), a.getAttribute("data-node"));
    });
  });
  document.querySelectorAll("tr.rewrite-row").forEach(function (tr) {
    tr.addEventListener("click", function (e) {
      if (e.target.tagName === "A") return;
      document.querySelectorAll("tr.rewrite-row.active").forEach(function (r) { r.classList.remove("active"); });
      tr.classList.add("active");
      var backend = tr.getAttribute("data-backend"), name = tr.getAttribute("data-node");
      var left = DATA.kind === "check" ? "asis:" + backend : "before";
      var right = DATA.kind === "check" ? "after:" + backend : "converted";
      if (viewsById[left] && panels[0].view.id !== left) panels[0].setView(left);
      if (viewsById[right] && panels[1].view.id !== right) panels[1].setView(right);
      var g = graphInfo(panels[0].gid);
      if (name in g._index) selectNode(panels[0].gid, g._index[name], panels[0], true);
      document.getElementById("graphs").scrollIntoView({ behavior: "smooth", block: "start" });
    });
  });

  // Search: by name (substring) or op (exact), Enter for the next hit.
  var search = document.getElementById("search"), status = document.getElementById("search-status");
  var hits = [], hitAt = -1, lastQuery = "";
  search.addEventListener("keydown", function (e) {
    if (e.key !== "Enter") return;
    var q = search.value.trim().toLowerCase(), p = panels[0], g = p.g;
    if (!q) return;
    if (q !== lastQuery || !hits.length) {
      hits = [];
      for (var i = 0; i < g.names.length; i++) {
        if (g.names[i].toLowerCase().indexOf(q) >= 0 || g.ops[i].toLowerCase() === q) hits.push(i);
      }
      hitAt = -1; lastQuery = q;
    }
    if (!hits.length) { status.textContent = "no match"; return; }
    hitAt = (hitAt + 1) % hits.length;
    status.textContent = (hitAt + 1) + "/" + hits.length;
    selectNode(p.gid, hits[hitAt], p, true);
  });

  // ------------------------------------------------------------------------------------------------
  // Start
  // ------------------------------------------------------------------------------------------------
  var box = document.getElementById("panels");
  var pair = DATA.pairs[0] || [DATA.views[0].id, DATA.views[0].id];
  [0, 1].forEach(function (k) {
    var div = document.createElement("div");
    box.appendChild(div);
    panels.push(new Panel(div, k));
  });
  var single = document.getElementById("single");
  if (pair[0] === pair[1]) { single.checked = true; panels[1].root.classList.add("hidden"); }
  panels[0].setView(pair[0]);
  panels[1].setView(pair[1]);
  single.addEventListener("change", function () {
    panels[1].root.classList.toggle("hidden", single.checked);
    panels.forEach(function (p) { p.rebuild(true); });
  });
  if (window.ResizeObserver) {
    var resizing = null;
    new ResizeObserver(function () {
      clearTimeout(resizing);
      resizing = setTimeout(function () { panels.forEach(function (p) { if (!p.root.classList.contains("hidden")) p.rebuild(true); }); }, 120);
    }).observe(box);
  }

  window.mobileEp = {
    data: DATA,
    panels: panels,
    errors: errors,
    select: selectByName,
    /* Every visible panel zoomed out to its whole graph (as the fit button does), drawn now. */
    fitAll: function () {
      panels.forEach(function (p) { if (!p.root.classList.contains("hidden")) { p.fit(); p.drawNow(); } });
    },
    /* Where panel *k* draws node *name* now, in client coordinates ({x, y}), or null when it is not drawn
     * on its own (unknown, or inside a collapsed chain). */
    pointOf: function (k, name) {
      var p = panels[k], it = p.g.names.indexOf(name);
      p.drawNow();
      return it < 0 || it >= p.nNodes || p.itemAt(p.pointOf(it).x, p.pointOf(it).y) !== it ? null : p.pointOf(it);
    },
    /* The name of the node a click at (x, y) selects in panel *k* (the hit-testing a click uses), or null. */
    nodeAt: function (k, x, y) {
      var p = panels[k], it = p.itemAt(x, y);
      return it >= 0 && it < p.nNodes ? p.g.names[it] : null;
    },
    stats: function () {
      return panels.filter(function (p) { return !p.root.classList.contains("hidden"); }).map(function (p) {
        return { view: p.view.id, graph: p.gid, drawn: p.drawn, total: p.nNodes, collapsed: p.collapsed,
                 layout: p.layoutName, scale: p.s,
                 partitions: p.view.parts.length, cpu: p.view.place.filter(function (x) { return x < 0; }).length };
      });
    }
  };
  document.body.setAttribute("data-ready", "1");
})();
