import assert from "node:assert/strict";
import { test } from "node:test";

import { MAX_NODE_WIDTH, blockDetail, itemLabel, labelRoom, layoutRequest, smallRoom } from "../src/graph/layout_request.js";
import { autogradModel } from "../src/graph/model.js";
import { ellipsize } from "../src/graph/text.js";
import {
  MIN_LABEL_PX,
  READABLE_SCALE,
  SMALLEST_FONT_PX,
  fitTransform,
  minimapPoint,
  minimapSize,
  minimapViewport,
  overflows,
  wholeTransform,
} from "../src/graph/viewport.js";
import { visibleGraph } from "../src/graph/visible.js";
import { nestedPayload } from "./graph_fixtures.js";

const view = { width: 800, height: 480 };
// Screen position of a layout point under a transform.
const screen = (t, [x, y]) => [t.x + x * t.k, t.y + y * t.k];

test("the readable scale draws the smallest font at 9 px", () => {
  assert.equal(MIN_LABEL_PX, 9);
  assert.ok(SMALLEST_FONT_PX * READABLE_SCALE >= 9 - 1e-9);
});

test("fit: a small graph is shown whole and centred, never blown up past 1.2", () => {
  const bounds = { x: 0, y: 0, width: 200, height: 100 };
  const t = fitTransform(bounds, view);
  assert.equal(t.partial, false);
  assert.equal(t.k, 1.2);
  const [cx, cy] = screen(t, [100, 50]);
  assert.ok(Math.abs(cx - 400) < 1e-9 && Math.abs(cy - 240) < 1e-9);
});

test("fit: a graph that fits only below the readable scale is shown at that scale from its top, centred across", () => {
  const bounds = { x: 0, y: 0, width: 300, height: 6000 };
  const t = fitTransform(bounds, view);
  assert.equal(t.partial, true);
  assert.equal(t.k, READABLE_SCALE);
  const [left, top] = screen(t, [0, 0]);
  const [right] = screen(t, [300, 0]);
  assert.ok(top > 0 && top <= 8, `top of the graph at ${top}`);
  assert.ok(Math.abs((left + right) / 2 - 400) < 1e-9);
});

test("fit: a mid-sized graph that fits at a readable scale shrinks to fit whole", () => {
  const bounds = { x: 0, y: 0, width: 600, height: 500 };
  const t = fitTransform(bounds, view);
  assert.equal(t.partial, false);
  assert.ok(t.k < 1 && t.k >= READABLE_SCALE);
  const [, top] = screen(t, [0, 0]);
  const [, bottom] = screen(t, [0, 500]);
  assert.ok(top >= 0 && bottom <= 480);
});

test("fit around a focus: centred on it, but never past the graph's edges", () => {
  const bounds = { x: 0, y: 0, width: 3000, height: 6000 };
  const mid = fitTransform(bounds, view, [1500, 3000]);
  assert.deepEqual(screen(mid, [1500, 3000]).map(Math.round), [400, 240]);
  const corner = fitTransform(bounds, view, [0, 0]);
  const [left, top] = screen(corner, [0, 0]);
  assert.ok(left > 0 && left <= 8 && top > 0 && top <= 8, `${left}, ${top}`);
  const end = fitTransform(bounds, view, [3000, 6000]);
  const [right, bottom] = screen(end, [3000, 6000]);
  assert.ok(right < 800 && right >= 792 && bottom < 480 && bottom >= 472, `${right}, ${bottom}`);
});

test("overflows: whether part of the graph is outside the view", () => {
  const bounds = { x: 0, y: 0, width: 300, height: 6000 };
  assert.equal(overflows(bounds, fitTransform(bounds, view), view), true);
  const small = { x: 0, y: 0, width: 200, height: 100 };
  assert.equal(overflows(small, fitTransform(small, view), view), false);
});

test("minimap: the layout scaled into its box, the view's rectangle on it, a press mapped back to the layout", () => {
  const bounds = { x: 0, y: 0, width: 1600, height: 2400 };
  const map = minimapSize(bounds, { width: 160, height: 120 });
  assert.deepEqual([map.sx, map.sy, map.width, map.height], [0.05, 0.05, 80, 120]);
  // the view (800×480 at k=1) shows layout x ∈ [-200, 600], y ∈ [1000, 1480]
  const rect = minimapViewport(bounds, { x: 200, y: -1000, k: 1 }, view, map);
  assert.deepEqual(rect, { x: 0, y: 50, width: 30, height: 24 });
  // a view past the bottom is clipped to the map
  const low = minimapViewport(bounds, { x: 0, y: -2200, k: 1 }, view, map);
  assert.equal(low.y + low.height, 120);
  assert.deepEqual(minimapPoint(bounds, map, 10, 60), [200, 1200]);
});

test("minimap of a tall, narrow graph: stretched across to a usable width, the point mapping following", () => {
  const bounds = { x: 0, y: 0, width: 240, height: 12000 };
  const map = minimapSize(bounds, { width: 160, height: 120 });
  assert.equal(map.height, 120);
  assert.equal(map.width, 48);
  assert.deepEqual(minimapPoint(bounds, map, 24, 60), [120, 6000]);
  const rect = minimapViewport(bounds, { x: 0, y: 0, k: 1 }, view, map);
  assert.deepEqual([rect.x, rect.width], [0, 48]); // the view is wider than the graph
  assert.equal(rect.height, 4.8);
});

test("ellipsize: long text cut in the middle to the room it has, short text unchanged", () => {
  assert.equal(ellipsize("conv1", 10), "conv1");
  assert.equal(ellipsize("encoder.layer.11.attention.weight", 11), "encod…eight");
  assert.equal(ellipsize("encoder.layer.11.attention.weight", 11).length, 11);
  assert.equal(ellipsize("abc", 1), "…");
});

test("labels fit their boxes: a long parameter name is cut to the node's width, a block's ▸ marker is counted", () => {
  const payload = nestedPayload(1, 2, 2);
  const long = "encoder.layers.11.self_attention.in_projection.weight_of_a_very_long_name";
  payload.params[0][1] = long;
  const model = autogradModel(payload);
  const all = new Set(model.order);
  const request = layoutRequest(model, visibleGraph(model, all));
  const param = request.nodes.find((n) => n.key === "n0");
  assert.equal(param.width, MAX_NODE_WIDTH);
  const room = labelRoom(param.width);
  assert.ok(room < long.length && room * 6.7 <= param.width - 8);
  // collapsed: each block is wide enough for "▸ name" and its detail line
  const collapsed = visibleGraph(model, new Set());
  for (const node of layoutRequest(model, collapsed).nodes) {
    const item = collapsed.items.find((i) => i.key === node.key);
    assert.ok(itemLabel(model, item).startsWith("▸ "));
    assert.ok(labelRoom(node.width) >= itemLabel(model, item).length, node.key);
    assert.ok(smallRoom(node.width - 8) >= blockDetail(model, item).length, node.key);
  }
});

test("Fit shows the whole graph, centred, however small: a tall graph inside the view, a small one at 1.2 at most", () => {
  for (const bounds of [{ x: -40, y: 10, width: 3000, height: 6000 }, { x: 5, y: 5, width: 9000, height: 200 }]) {
    const t = wholeTransform(bounds, view);
    assert.equal(overflows(bounds, t, view), false);
    assert.ok(t.k < READABLE_SCALE); // smaller than the readable fit would draw it
    const [cx, cy] = screen(t, [bounds.x + bounds.width / 2, bounds.y + bounds.height / 2]);
    assert.ok(Math.abs(cx - view.width / 2) < 1e-6 && Math.abs(cy - view.height / 2) < 1e-6);
  }
  assert.equal(wholeTransform({ x: 0, y: 0, width: 100, height: 50 }, view).k, 1.2);
});
