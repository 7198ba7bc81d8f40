// page.js - draws a `vmtrace timeline` page (src/timeline/html.c embeds
// this file and the data as JSON; no network, no libraries).
//
// Per vCPU: a guest lane and a host lane (one row per call depth) and a
// "VM exits" counter row.  Slices narrower than a pixel are aggregated per
// pixel (the pixel takes the colour of the name that covers most of it);
// when the recording had more slices than the page keeps, the summary bins
// are drawn under the kept (longest) slices.  Wheel zooms, drag pans, a
// click shows a slice's details, "0" shows everything; the URL may say
// #find=NAME[&lane=LANE] (zoom to the first slice of that name, on that
// lane, and select it) or #view=START,END (relative times).
//
// What was drawn is recorded in the DOM for tests: body[data-draws],
// body[data-lanes] (JSON), body[data-slices-drawn], and <ol id="drawn">
// with one <li data-lane data-name data-kind data-how data-x data-y> per drawn slice
// ("slice"), pixel of several slices ("pixel", the dominant name) and row
// of summary bins ("bin"), at most MAX_RECORDED.
"use strict";

const D = JSON.parse(document.getElementById("data").textContent);
const canvas = document.getElementById("timeline");
const ctx = canvas.getContext("2d");
const LABEL_W = 150, AXIS_H = 22, ROW_H = 13, COUNTER_H = 28, GAP = 6, MAX_RECORDED = 5000;
const MAX_ROWS = 12;     // call depths shown per lane (deeper slices: in their details only)
const span = Math.max(D.nbins * D.bin, 1);
let view = { a: 0, b: span };
let selected = null;

// ------------------------------------------------------------------ data
// slices by lane and depth: arrays of {s, d, name, kind, details}, sorted
// by start (slices of one depth do not overlap, so ends are sorted too)
const rows = D.lanes.map(l => Array.from({ length: l.depth }, () => []));
for (const [lane, depth, s, d, name, kind, details] of D.slices)
	rows[lane][depth].push({ lane, depth, s, d, name, kind, details });

// the rows on the canvas, top to bottom
const layout = [];
(function () {
	let y = AXIS_H;
	const num = v => Number((v.name.match(/\d+/) || [0])[0]);
	const order = D.vcpus.map((v, i) => i).sort((p, q) => num(D.vcpus[p]) - num(D.vcpus[q]));
	order.forEach(i => {
		const v = D.vcpus[i];
		for (const mode of ["guest", "host"]) {
			const lane = 2 * i + (mode === "host" ? 1 : 0);
			const depth = D.lanes[lane] ? D.lanes[lane].depth : 0;
			const label = v.name + " " + mode;
			for (let d = 0; d < Math.min(Math.max(depth, 1), MAX_ROWS); d++) {
				layout.push({ kind: "lane", lane, depth: d, y, h: ROW_H, label: d ? "" : label, name: label });
				y += ROW_H;
			}
			y += 2;
		}
		layout.push({ kind: "counter", vcpu: i, y, h: COUNTER_H, label: v.name + " VM exits", name: v.name + " VM exits" });
		y += COUNTER_H + GAP;
	});
	layout.height = y;
})();

// ------------------------------------------------------------- helpers
function hue(name) {
	let h = 0;
	for (let i = 0; i < name.length; i++)
		h = (h * 31 + name.charCodeAt(i)) >>> 0;
	return h % 360;
}
function colour(nameId, kind, alpha) {
	if (kind === 1)
		return `hsla(0, 75%, 50%, ${alpha})`;     // VM exits: red
	return `hsla(${hue(D.names[nameId] || "")}, 55%, 60%, ${alpha})`;
}
function fmt(t) {
	if (D.unit === "instructions")
		return Math.round(t) + " insns";
	if (t >= 1e6) return (t / 1e6).toFixed(3) + " ms";
	if (t >= 1e3) return (t / 1e3).toFixed(2) + " us";
	return Math.round(t) + " ns";
}
function plotW() { return canvas.width / devicePixelRatio - LABEL_W; }
function x(t) { return LABEL_W + (t - view.a) / (view.b - view.a) * plotW(); }
function tAt(px) { return view.a + (px - LABEL_W) / plotW() * (view.b - view.a); }
// first slice of a row that ends at or after t
function firstVisible(list, t) {
	let lo = 0, hi = list.length;
	while (lo < hi) {
		const m = (lo + hi) >> 1;
		if (list[m].s + list[m].d < t) lo = m + 1; else hi = m;
	}
	return lo;
}

// ---------------------------------------------------------------- drawing
let record;   // what this draw drew: [lane label, name, kind, how]

// x: the middle of what was drawn (canvas pixels), y: its row's middle
function note(row, name, kind, how, x) {
	record.count++;
	if (record.items.length < MAX_RECORDED)
		record.items.push([row.name, name, kind, how, Math.round(x), row.y + (row.h >> 1)]);
}

function drawBins(row) {
	const lane = D.lanes[row.lane];
	const r = lane && lane.rows[row.depth];
	if (!r)
		return;
	const first = Math.max(0, Math.floor(view.a / D.bin)), last = Math.min(D.nbins - 1, Math.floor(view.b / D.bin));
	let n = 0;
	for (let i = first; i <= last; i++) {
		if (!r.count[i])
			continue;
		const x0 = x(i * D.bin), x1 = Math.max(x(i * D.bin + D.bin), x0 + 1);
		ctx.fillStyle = colour(r.name[i], 0, 0.25 + 0.5 * Math.min(1, r.busy[i] / D.bin));
		ctx.fillRect(x0, row.y, x1 - x0, row.h - 1);
		n++;
	}
	if (n)   // one record per row: the summary drawn under the kept slices
		note(row, n + " bins", 0, "bin", LABEL_W);
}

function flushPixel(row, px) {
	if (!px.n)
		return;
	ctx.fillStyle = colour(px.best.name, px.best.kind, 0.9);
	ctx.fillRect(px.p, row.y, 1, row.h - 1);
	// a pixel holding one slice is that slice, one pixel wide
	note(row, D.names[px.best.name], px.best.kind, px.n === 1 ? "slice" : "pixel", px.p);
	px.n = 0;
}

function drawSlices(row) {
	const list = rows[row.lane] ? rows[row.lane][row.depth] || [] : [];
	const px = { p: -1, n: 0, best: null };
	for (let i = firstVisible(list, view.a); i < list.length && list[i].s <= view.b; i++) {
		const sl = list[i], x0 = Math.max(x(sl.s), LABEL_W), x1 = x(sl.s + sl.d);
		if (x1 - x0 < 1) {            // narrower than a pixel: aggregated
			const p = Math.floor(x0);
			if (p !== px.p) { flushPixel(row, px); px.p = p; }
			if (!px.n || sl.d > px.best.d) px.best = sl;
			px.n++;
			continue;
		}
		flushPixel(row, px);
		ctx.fillStyle = colour(sl.name, sl.kind, sl === selected ? 1 : 0.85);
		ctx.fillRect(x0, row.y, x1 - x0, row.h - 1);
		if (sl === selected) {
			ctx.strokeStyle = "#000";
			ctx.strokeRect(x0 + 0.5, row.y + 0.5, x1 - x0 - 1, row.h - 2);
		}
		if (x1 - x0 > 40) {
			ctx.fillStyle = "#111";
			ctx.save();
			ctx.beginPath();
			ctx.rect(x0, row.y, x1 - x0, row.h);
			ctx.clip();
			ctx.fillText(D.names[sl.name], x0 + 2, row.y + row.h - 3);
			ctx.restore();
		}
		note(row, D.names[sl.name], sl.kind, "slice", (x0 + x1) / 2);
	}
	flushPixel(row, px);
}

function drawCounter(row) {
	const c = D.vcpus[row.vcpu].counter;
	const max = Math.max(1, ...c.filter(v => v !== null));
	const first = Math.max(0, Math.floor(view.a / D.bin)), last = Math.min(c.length - 1, Math.floor(view.b / D.bin));
	ctx.fillStyle = "hsl(0, 60%, 45%)";
	for (let i = first; i <= last; i++) {
		if (!c[i])
			continue;
		const x0 = x(i * D.bin), h = c[i] / max * (row.h - 4);
		ctx.fillRect(x0, row.y + row.h - h, Math.max(x(i * D.bin + D.bin) - x0, 1), h);
	}
	ctx.fillStyle = "#444";
	ctx.fillText("max " + max, LABEL_W + 2, row.y + 10);
}

function drawAxis() {
	ctx.fillStyle = "#333";
	ctx.strokeStyle = "#ccc";
	for (let i = 0; i <= 10; i++) {
		const t = view.a + (view.b - view.a) * i / 10, px = x(t);
		ctx.fillText(fmt(t), px + 2, 12);
		ctx.beginPath();
		ctx.moveTo(px + 0.5, AXIS_H - 6);
		ctx.lineTo(px + 0.5, layout.height);
		ctx.stroke();
	}
}

function draw() {
	const w = Math.max(600, window.innerWidth - 20);
	canvas.width = w * devicePixelRatio;
	canvas.height = layout.height * devicePixelRatio;
	canvas.style.width = w + "px";
	canvas.style.height = layout.height + "px";
	ctx.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
	ctx.font = "11px sans-serif";
	ctx.clearRect(0, 0, w, layout.height);
	record = { count: 0, items: [] };
	drawAxis();
	ctx.save();
	ctx.beginPath();
	ctx.rect(LABEL_W, 0, w - LABEL_W, layout.height);
	ctx.clip();
	for (const row of layout) {
		if (row.kind === "counter") { drawCounter(row); continue; }
		if (!D.complete) drawBins(row);
		drawSlices(row);
	}
	ctx.restore();
	ctx.fillStyle = "#000";
	for (const row of layout)
		if (row.label) ctx.fillText(row.label, 4, row.y + 11);
	publish();
}

// what was drawn, for tests (and curious users)
function publish() {
	const b = document.body.dataset;
	b.draws = String(Number(b.draws || 0) + 1);
	b.lanes = JSON.stringify(layout.filter(r => r.label).map(r => r.label));
	b.slicesDrawn = String(record.count);
	b.view = view.a + "," + view.b;
	const ol = document.getElementById("drawn");
	ol.replaceChildren(...record.items.map(([lane, name, kind, how, x, y]) => {
		const li = document.createElement("li");
		li.dataset.lane = lane;
		li.dataset.name = name;
		li.dataset.kind = kind === 1 ? "exit" : "function";
		li.dataset.how = how;
		li.dataset.x = x;
		li.dataset.y = y;
		return li;
	}));
}

// ------------------------------------------------------------ interaction
function show(sl) {
	selected = sl;
	const el = document.getElementById("details");
	if (!sl) { el.textContent = ""; return; }
	const lane = laneName(sl.lane);
	el.textContent = `${D.names[sl.name]}\n${lane}, depth ${sl.depth}\nstart ${fmt(sl.s)}, duration ${fmt(sl.d)}\n` +
		sl.details;
	el.dataset.name = D.names[sl.name];
	el.dataset.kind = sl.kind === 1 ? "exit" : "function";
}

function hit(px, py) {
	const row = layout.find(r => r.kind === "lane" && py >= r.y && py < r.y + r.h);
	if (!row)
		return null;
	const list = rows[row.lane][row.depth] || [], t = tAt(px), slack = (view.b - view.a) / plotW() * 2;
	const i = firstVisible(list, t - slack);
	return i < list.length && list[i].s <= t + slack ? list[i] : null;
}

function zoom(factor, px) {
	const t = tAt(px), a = t - (t - view.a) * factor, b = t + (view.b - t) * factor;
	view = { a: Math.max(-span * 0.05, a), b: Math.min(span * 1.05, Math.max(b, a + 1)) };
	draw();
}

let drag = null;
canvas.addEventListener("wheel", e => { e.preventDefault(); zoom(e.deltaY > 0 ? 1.25 : 0.8, e.offsetX); });
canvas.addEventListener("mousedown", e => { drag = { x: e.offsetX, a: view.a, b: view.b, moved: false }; });
window.addEventListener("mouseup", e => {
	if (drag && !drag.moved && e.target === canvas) { show(hit(e.offsetX, e.offsetY)); draw(); }
	drag = null;
});
canvas.addEventListener("mousemove", e => {
	if (!drag) return;
	const dt = (e.offsetX - drag.x) / plotW() * (drag.b - drag.a);
	if (Math.abs(e.offsetX - drag.x) > 2) drag.moved = true;
	view = { a: drag.a - dt, b: drag.b - dt };
	draw();
});
window.addEventListener("keydown", e => { if (e.key === "0") { view = { a: 0, b: span }; draw(); } });
window.addEventListener("resize", draw);

// #find=NAME[&lane=LANE] or #view=A,B[&click=X,Y] (a click at canvas
// pixel X,Y after drawing: what tests use to click a drawn slice)
function laneName(lane) { return D.vcpus[lane >> 1].name + (lane & 1 ? " host" : " guest"); }
function fromHash() {
	const q = new URLSearchParams(location.hash.slice(1));
	if (q.has("find")) {
		const id = D.names.indexOf(q.get("find")), lane = q.get("lane");
		const sl = rows.flat(2).filter(s => s.name === id && (!lane || laneName(s.lane) === lane))
			.sort((p, r) => p.s - r.s)[0];
		if (sl) {
			view = { a: sl.s - sl.d - 1, b: sl.s + 2 * sl.d + 1 };
			show(sl);
		}
		document.body.dataset.found = sl ? "yes" : "no";
	} else if (q.has("view")) {
		const [a, b] = q.get("view").split(",").map(Number);
		if (b > a) view = { a, b };
	}
	return q.get("click");
}

function clickAt(xy) {
	const [px, py] = xy.split(",").map(Number), r = canvas.getBoundingClientRect();
	for (const type of ["mousedown", "mouseup"])
		canvas.dispatchEvent(new MouseEvent(type, { bubbles: true, clientX: r.left + px, clientY: r.top + py }));
}
window.addEventListener("hashchange", () => { fromHash(); draw(); });
const click = fromHash();
draw();
if (click)
	clickAt(click);
