// The timeline page: one row per object of the chain, a mark per change
// coloured by class, arrows from cause to effect with the latency, updated
// live from the Server-Sent Events of api/watch.
"use strict";
const COLORS = {create: "#2e7d32", schedule: "#1565c0", start: "#6a1b9a", ready: "#00838f",
  scale: "#ef6c00", rollout: "#c62828", status: "#9e9e9e", update: "#5d4037", delete: "#212121"};
const api = (path, params) => fetch("api/" + path + "?" + new URLSearchParams(params)).then(r => r.json());
const $ = id => document.getElementById(id);
const SVGNS = "http://www.w3.org/2000/svg";
let current = null, loading = false, pending = false;

function el(name, attrs, text) {
  const e = document.createElementNS(SVGNS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmtLatency(ms) {
  if (ms < 10) return ms.toFixed(1) + " ms";
  if (ms < 1000) return Math.round(ms) + " ms";
  return (ms / 1000).toFixed(1) + " s";
}

async function loadObjects() {
  const keep = $("name").value;
  const objs = await api("objects", {kind: $("kind").value, namespace: $("ns").value});
  const sel = $("name");
  sel.innerHTML = "";
  for (const o of Array.isArray(objs) ? objs : []) {
    const opt = document.createElement("option");
    opt.value = opt.textContent = o.name;
    sel.appendChild(opt);
  }
  if (keep && [...sel.options].some(o => o.value === keep)) sel.value = keep;
  else if (current) {
    const opt = document.createElement("option");
    opt.value = opt.textContent = current.name;
    sel.appendChild(opt);
    sel.value = current.name;
  }
}

async function show() {
  current = {kind: $("kind").value, namespace: $("ns").value, name: $("name").value};
  if (!current.name) return;
  refresh();
}

async function refresh() {
  if (!current) return;
  if (loading) { pending = true; return; }
  loading = true;
  try {
    const tl = await api("timeline", current);
    if (tl.error) $("status").textContent = tl.error;
    else { draw(tl); $("status").textContent = "revision " + tl.head + ", " + tl.steps.length + " steps"; }
  } finally {
    loading = false;
    if (pending) { pending = false; refresh(); }
  }
}

function rowOrder(tl) {
  // Ancestors and causes first, then the root and its descendants, each
  // child under its owner.
  const order = [], seen = new Set();
  const kids = {};
  tl.objects.forEach((o, i) => { (kids[o.owner] = kids[o.owner] || []).push(i); });
  const visit = i => {
    if (seen.has(i)) return;
    seen.add(i); order.push(i);
    for (const k of kids[tl.objects[i].uid] || []) if (tl.objects[k].depth > tl.objects[i].depth) visit(k);
  };
  tl.objects.forEach((o, i) => { if (o.depth < 0) { seen.add(i); order.push(i); } });
  visit(0);
  tl.objects.forEach((o, i) => visit(i));
  return order;
}

function draw(tl) {
  const svg = $("chart");
  svg.innerHTML = "";
  const defs = el("defs", {});
  const marker = el("marker", {id: "head", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto"});
  marker.appendChild(el("path", {d: "M0,0 L10,5 L0,10 z", fill: "#888"}));
  defs.appendChild(marker); svg.appendChild(defs);
  const order = rowOrder(tl), rowY = {};
  const rowH = 26, left = 260, top = 20, width = 1200;
  order.forEach((i, n) => { rowY[i] = top + n * rowH; });
  svg.setAttribute("height", top + order.length * rowH + 20);
  const t0 = tl.steps.length ? Date.parse(tl.steps[0].time) : 0;
  const t1 = tl.steps.length ? Date.parse(tl.steps[tl.steps.length - 1].time) : 1;
  // Positions by rank and time blended, so bursts stay readable.
  const n = Math.max(tl.steps.length - 1, 1), span = Math.max(t1 - t0, 1);
  const x = (s, i) => left + 10 + (width - left - 30) * (0.5 * i / n + 0.5 * (Date.parse(s.time) - t0) / span);
  order.forEach(i => {
    const o = tl.objects[i], y = rowY[i];
    const g = el("g", {class: "row", "data-kind": o.kind, "data-name": o.name});
    g.appendChild(el("line", {class: "row-line", x1: left, x2: width - 10, y1: y, y2: y}));
    const indent = Math.max(o.depth, 0) * 12;
    g.appendChild(el("text", {class: "label", x: 4 + indent, y: y + 4}, o.kind + " " + o.name));
    svg.appendChild(g);
  });
  const pos = tl.steps.map((s, i) => [x(s, i), rowY[s.object]]);
  tl.steps.forEach((s, i) => {
    if (s.cause < 0 || s.causeKind !== "causation") return;
    const [x1, y1] = pos[s.cause], [x2, y2] = pos[i];
    svg.appendChild(el("path", {class: "arrow", d: `M${x1},${y1} C${(x1 + x2) / 2},${y1} ${(x1 + x2) / 2},${y2} ${x2 - 5},${y2}`}));
  });
  tl.steps.forEach((s, i) => {
    const [cx, cy] = pos[i];
    const c = el("circle", {class: "mark", "data-class": s.class, "data-rev": s.pos.revision, cx, cy, r: 5,
      fill: COLORS[s.class] || "#000", stroke: i === tl.origin ? "#fbc02d" : "none", "stroke-width": 3});
    c.appendChild(el("title", {}, `${s.pos.revision} ${s.what} by ${s.actor || "-"}` +
      (s.cause >= 0 ? ` (${fmtLatency(s.latencyMs)} after cause)` : "")));
    c.addEventListener("click", () => detail(tl, i));
    svg.appendChild(c);
    if (s.cause >= 0 && s.causeKind === "causation" && s.class !== "status")
      svg.appendChild(el("text", {class: "lat", x: cx + 6, y: cy - 7}, fmtLatency(s.latencyMs)));
  });
}

function detail(tl, i) {
  const s = tl.steps[i], o = tl.objects[s.object];
  const lines = [`${s.pos.revision} ${s.time} ${o.kind}/${o.name} ${s.verb} by ${s.actor || "-"}: ${s.what}`];
  for (const c of s.diff || []) lines.push("  " + c.path + ": " + (c.old || "") + " -> " + (c.new || ""));
  $("detail").textContent = lines.join("\n");
}

function legend() {
  for (const k in COLORS) {
    const s = document.createElement("span");
    s.innerHTML = `<i style="background:${COLORS[k]}"></i>${k}`;
    $("legend").appendChild(s);
  }
}

function watch() {
  const es = new EventSource("api/watch");
  es.addEventListener("head", () => { refresh(); loadObjects(); });
}

$("load").addEventListener("click", show);
$("kind").addEventListener("change", loadObjects);
$("ns").addEventListener("change", loadObjects);
legend();
const params = new URLSearchParams(location.search);
if (params.get("kind")) $("kind").value = params.get("kind");
if (params.get("namespace")) $("ns").value = params.get("namespace");
loadObjects().then(() => {
  if (params.get("name")) { $("name").value = params.get("name"); current = {kind: $("kind").value, namespace: $("ns").value, name: params.get("name")}; refresh(); }
  else show();
});
watch();
