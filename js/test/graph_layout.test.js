import assert from "node:assert/strict";
import { test } from "node:test";

import { computeLayout, layoutSteps } from "../src/graph/layout.js";
import { packLayout, unpackLayout } from "../src/graph/layout_pack.js";
import { layoutRequest } from "../src/graph/layout_request.js";
import { SLICE_LIMIT } from "../src/graph/layout_slices.js";
import { autogradModel } from "../src/graph/model.js";
import { expandSubtree, visibleGraph } from "../src/graph/visible.js";
import { flatPayload, nestedPayload } from "./graph_fixtures.js";

function inside([x, y, w, h], [bx, by, bw, bh]) {
  return x - w / 2 >= bx - bw / 2 && x + w / 2 <= bx + bw / 2 && y - h / 2 >= by - bh / 2 && y + h / 2 <= by + bh / 2;
}

function overlap([ax, ay, aw, ah], [bx, by, bw, bh]) {
  return Math.abs(ax - bx) < (aw + bw) / 2 && Math.abs(ay - by) < (ah + bh) / 2;
}

function sampleRequest() {
  const model = autogradModel(nestedPayload(2, 2, 2));
  const visible = visibleGraph(model, expandSubtree(model, new Set(), model.byPath.get("0")));
  return { model, visible, request: layoutRequest(model, visible) };
}

/** Every node of `payload` shown: every cluster expanded. */
function openRequest(payload) {
  const model = autogradModel(payload);
  return layoutRequest(model, visibleGraph(model, expandSubtree(model, new Set(), model.root)));
}

test("layout request: every item sized from its label, boxes and edges by key", () => {
  const { model, visible, request } = sampleRequest();
  assert.equal(request.nodes.length, visible.items.length);
  const block = request.nodes.find((n) => n.key === `c${model.byPath.get("1")}`);
  assert.ok(block.height > request.nodes.find((n) => n.key.startsWith("n")).height, "blocks have two lines");
  assert.ok(request.nodes.every((n) => n.width >= 56 && n.width <= 260));
  assert.deepEqual(
    request.boxes.map((b) => b.key),
    visible.boxes.map((b) => b.key),
  );
  JSON.stringify(request); // plain data: it is posted to a worker
});

/** The layout's invariants: a finite rect for every item and box, items inside their boxes, edges pointing down. */
function assertWellFormed(request, layout) {
  assert.deepEqual(Object.keys(layout.positions).sort(), [...request.nodes, ...request.boxes].map((i) => i.key).sort());
  for (const item of [...request.nodes, ...request.boxes]) {
    const rect = layout.positions[item.key];
    assert.equal(rect.length, 4, item.key);
    assert.ok(rect.every(Number.isFinite), item.key);
    if (item.box) assert.ok(inside(rect, layout.positions[item.box]), `${item.key} in ${item.box}`);
  }
  assert.equal(layout.edges.length, request.edges.length);
  for (const edge of layout.edges) {
    assert.ok(edge.points.length >= 2);
    const [, y0] = edge.points[0];
    const [, y1] = edge.points.at(-1);
    assert.ok(y1 > y0, `${edge.src} -> ${edge.dst} points down`);
  }
  assert.ok(layout.width > 0 && layout.height > 0);
}

test("layout result: positions for every item and box, items inside their boxes, edges routed top to bottom", () => {
  const { request } = sampleRequest();
  assertWellFormed(request, computeLayout(request));
});

test("a container of more members than one short dagre call takes is laid out in slices, none of them drawn", () => {
  const request = openRequest(flatPayload(50)); // 200 nodes in the root
  const steps = [...layoutSteps(request)];
  assert.ok(steps.length >= 200 / SLICE_LIMIT, `${steps.length} steps`);
  assert.deepEqual(steps[0], { done: 0, total: steps.length - 1 });
  assert.deepEqual(steps.at(-1), { done: steps.length - 1, total: steps.length - 1 });
  const layout = computeLayout(request);
  assertWellFormed(request, layout); // no slice among the positions: they are not drawn
  const rects = request.nodes.map((n) => layout.positions[n.key]);
  for (let i = 0; i < rects.length; i++) {
    for (let j = i + 1; j < rects.length; j++) assert.ok(!overlap(rects[i], rects[j]), `${i} overlaps ${j}`);
  }
  // Each parameter is drawn right above the op that reads it, not in a row at the top with the others.
  for (const [src, dst] of request.edges.map((e) => [e.src, e.dst])) {
    const gap = layout.positions[dst][1] - layout.positions[src][1];
    assert.ok(gap < 200, `${src} -> ${dst} spans ${gap} px`);
  }
  assert.ok(layout.width < 600, `${layout.width} px wide`);
});

test("a chain cut into slices is still one column; a graph of small boxes takes one step per box", () => {
  const chain = openRequest(nestedPayload(1, 1, 99)); // 100 nodes in one box: cut into slices
  const layout = computeLayout(chain);
  const xs = new Set(chain.nodes.map((n) => layout.positions[n.key][0]));
  assert.ok(xs.size <= 2, `a chain is a column (and its weights beside it): ${[...xs]}`);
  const small = openRequest(nestedPayload(2, 3, 3));
  assert.equal([...layoutSteps(small)].at(-1).total, small.boxes.length + 1, "one step per box, and the canvas");
});

test("packed layout: typed arrays that unpack to the same layout", () => {
  const { request } = sampleRequest();
  const layout = computeLayout(request);
  const packed = packLayout(request, layout);
  assert.ok(packed.rects instanceof Float64Array && packed.points instanceof Float64Array);
  assert.equal(packed.rects.length, 4 * (request.nodes.length + request.boxes.length));
  assert.deepEqual(unpackLayout(request, packed), layout);
});

test("layout of a 5,000-node graph opened collapsed takes well under a second", () => {
  const model = autogradModel(nestedPayload(10, 50, 9));
  const start = performance.now();
  const layout = computeLayout(layoutRequest(model, visibleGraph(model, new Set([model.root]))));
  const elapsed = performance.now() - start;
  assert.equal(Object.keys(layout.positions).length, 10);
  assert.ok(elapsed < 1000, `took ${elapsed.toFixed(0)} ms`);
});
