import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { SHOWN_LENGTH, displayName, displayPath, shortened, visible, visibleText } from "../src/format.js";
import { autogradModel, dataflowModel, shortName } from "../src/graph/model.js";

// Bidi overrides, isolates and marks, zero-width characters, the Arabic letter mark, a line break.
const INVISIBLE = "\u202e\u202a\u2066\u2069\u200b\u200c\u200d\u200e\u200f\u061c\n";
const BIDI = "txt\u202eexe";

test("visible escapes what Python's repr escapes, as Python writes it", () => {
  // the same expectation as tests/unit/test_display.py: both sides show a name alike
  assert.equal(visible(`a${INVISIBLE}b`), "a\\u202e\\u202a\\u2066\\u2069\\u200b\\u200c\\u200d\\u200e\\u200f\\u061c\\nb");
  assert.equal(visible("\x00\x7f\x85\u2028\u2029\u00a0\ufeff\t\r"), "\\x00\\x7f\\x85\\u2028\\u2029\\xa0\\ufeff\\t\\r");
  assert.equal(visible("\u{e0001}\ud800"), "\\U000e0001\\ud800"); // a tag character, a lone surrogate
  assert.equal(visible("layer1.0 conv·é 名前 🙂"), "layer1.0 conv·é 名前 🙂"); // printable text is left alone
});

test("visibleText keeps a text's own line breaks and tabs and escapes the rest", () => {
  assert.equal(visibleText(`Traceback:\n\tline ${BIDI}\r`), "Traceback:\n\tline txt\\u202eexe\\r");
});

test("long names are cut at 200 characters, counted as Python counts them", () => {
  assert.equal(SHOWN_LENGTH, 200);
  assert.equal(shortened("x".repeat(200)), "x".repeat(200));
  assert.equal(displayName("x".repeat(100_000)), `${"x".repeat(200)}…`);
  assert.equal(shortened("🙂".repeat(201)), `${"🙂".repeat(200)}…`); // never half a character
  assert.equal(displayPath(""), "(model)");
  assert.equal(displayPath(BIDI), "txt\\u202eexe");
});

test("graph labels and tooltips show names escaped and cut, ids and paths stay real", () => {
  const long = "m".repeat(100_000);
  assert.equal(shortName(`a.${BIDI}`), "txt\\u202eexe");
  const flow = dataflowModel({
    nodes: [
      { module: "<input>", ops: 0 },
      { module: long, ops: 2 },
      { module: "<output>", ops: 0 },
    ],
    edges: [{ src: "<input>", dst: long, tensors: 1, shapes: [[2, 4]] }],
  });
  const node = flow.nodes[1];
  assert.equal(node.id, long);
  assert.equal(node.label, `${"m".repeat(200)}…`);
  assert.ok(node.title.length < 300 && flow.edges[0][2].length < 300);
  const autograd = autogradModel({
    ids: [`${BIDI}/AddmmBackward0#0`],
    op: [0],
    ops: ["AddmmBackward0"],
    module: [1],
    modules: ["", BIDI],
    parents: [-1, 0],
  });
  assert.equal(autograd.nodes[0].id, `${BIDI}/AddmmBackward0#0`);
  assert.ok(!autograd.nodes[0].title.includes("\u202e") && autograd.nodes[0].title.includes("txt\\u202eexe"));
  assert.equal(autograd.clusters[autograd.byPath.get(BIDI)].name, "txt\\u202eexe");
});

const ROOT = fileURLToPath(new URL("..", import.meta.url));

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith(".js") ? [full] : [];
  });
}

test("text reaches the page only through the helpers that escape it", () => {
  // dom.js sets text and read attributes for every view; graph_svg.js's s() does so for the SVG
  const allowed = new Set([join(ROOT, "src", "view", "dom.js"), join(ROOT, "src", "view", "graph_svg.js")]);
  const sinks = [/\.textContent\s*=/, /createTextNode\(/, /\.title\s*=/, /\.setAttribute\(\s*["'](title|aria-label|alt)["']/];
  const files = sources(join(ROOT, "src"));
  assert.ok(files.some((file) => file.endsWith("inspector.js")));
  const hits = [];
  for (const file of files) {
    if (allowed.has(file)) continue;
    readFileSync(file, "utf8")
      .split("\n")
      .forEach((line, i) => {
        if (sinks.some((sink) => sink.test(line))) hits.push(`${file}:${i + 1}: ${line.trim()}`);
      });
  }
  assert.deepEqual(hits, []);
});
