// SPDX-License-Identifier: MIT
// check_memory_page.js PAGE WINDOW TIME_MS EXPECT... - runs the scripts of a `stepprof memory`
// page under node with a minimal stand-in for the DOM and the canvas, hovers window WINDOW's plot
// at TIME_MS and checks that the readout contains each EXPECT; also that every window drew and
// built its peak tables. Exits 1 with a message on the first failure.
"use strict";
const fs = require("fs");
const [page, win, at, ...expect] = process.argv.slice(2);
const html = fs.readFileSync(page, "utf8");
const elems = {};
function el(tag) {
	return {
		tag, children: [], style: {}, listeners: {}, textContent: "", title: "", clientWidth: 900,
		appendChild(c) { this.children.push(c); return c; },
		replaceChildren(...c) { this.children = c; },
		addEventListener(k, f) { this.listeners[k] = f; },
		getBoundingClientRect() { return { left: 0, top: 0 }; },
		getContext() { return new Proxy({ drawn: 0 }, { get: (t, k) => (k in t ? t[k] : () => { t.drawn++; }) }); },
	};
}
global.document = { createElement: el, getElementById: id => (elems[id] = elems[id] || el("section")) };
global.window = { devicePixelRatio: 1, addEventListener() {} };
const code = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map(m => m[1]).join("\n");
new Function(code)();
function fail(msg) { console.error("check_memory_page: " + msg); process.exit(1); }
for (const id of Object.keys(elems)) {
	const sec = elems[id];
	if (!sec.children.length || sec.children[0].tag !== "h2") fail(id + ": no heading");
}
const sec = elems["w" + win];
if (!sec) fail("no window " + win);
const plot = sec.children.find(c => c.children.length === 2 && c.children[0].listeners.mousemove);
if (!plot) fail("window " + win + ": no plot");
const W = 900, L = 84, R = 24, dur = parseFloat(sec.children[0].textContent.match(/, ([\d.]+) ms/)[1]);
plot.children[0].listeners.mousemove({ clientX: L + (W - L - R) * parseFloat(at) / dur });
const tip = plot.children[1];
if (tip.style.display !== "block") fail("no readout at " + at + " ms");
const text = tip.children.map(c => c.textContent).join("\n");
for (const e of expect) if (!text.includes(e)) fail(`readout lacks "${e}":\n${text}`);
const tables = sec.children.filter(c => c.tag === "table");
if (!tables.length) fail("window " + win + ": no peak table");
console.log(`memory page script: ok (${Object.keys(elems).length} windows, readout of ${tip.children.length} lines)`);
