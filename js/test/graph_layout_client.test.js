import assert from "node:assert/strict";
import { test } from "node:test";

import { runChunked } from "../src/graph/chunked.js";
import * as engine from "../src/graph/layout_engine.js";
import { StaleLayout, createLayoutClient } from "../src/graph/layout_client.js";
import { layoutRequest } from "../src/graph/layout_request.js";
import { autogradModel } from "../src/graph/model.js";
import { expandSubtree, visibleGraph } from "../src/graph/visible.js";
import { flatPayload, nestedPayload } from "./graph_fixtures.js";

/** Every node of `payload` shown. */
function openRequest(payload) {
  const model = autogradModel(payload);
  return layoutRequest(model, visibleGraph(model, expandSubtree(model, new Set(), model.root)));
}

const SMALL = openRequest(nestedPayload(2, 2, 2)); // 12 nodes in 6 boxes
const BIG = openRequest(flatPayload(50)); // 200 nodes in one container: several slices

/**
 * A stand-in for the browser's Worker, running the real engine on a later tick. `FakeWorker.mode`: "works" (says it is
 * ready, then answers), "throws" (the constructor throws, as where workers are forbidden), "refused" (an error event
 * and nothing else, as a CSP refusing blob: workers gives) or "crashes" (ready, then an error event on a request).
 */
class FakeWorker {
  static made = [];
  static mode = "works";
  constructor(url, options) {
    if (FakeWorker.mode === "throws") throw new Error("SecurityError: workers are not allowed here");
    this.url = url;
    this.options = options;
    this.terminated = false;
    this.mode = FakeWorker.mode;
    FakeWorker.made.push(this);
    this.later(() => (this.mode === "refused" ? this.onerror(errorEvent()) : this.onmessage({ data: { ready: true } })));
  }
  later(fn) {
    setTimeout(() => this.terminated || fn(), 5);
  }
  postMessage(data) {
    if (this.mode === "refused") return;
    if (this.mode === "crashes") this.later(() => this.onerror(errorEvent("Uncaught RangeError")));
    else this.later(() => engine.answer(structuredClone(data), (message) => this.onmessage({ data: message })));
  }
  terminate() {
    this.terminated = true;
  }
}

function errorEvent(message) {
  return { message, preventDefault() {} };
}

/** Run `body` with FakeWorker (in `mode`) as the global Worker. */
async function withWorker(mode, body) {
  FakeWorker.made = [];
  FakeWorker.mode = mode;
  globalThis.Worker = FakeWorker;
  try {
    await body();
  } finally {
    delete globalThis.Worker;
  }
}

const client = (options = {}) =>
  createLayoutClient({ engineSource: "/* engine */", loadEngine: async () => engine, mainThreadLimit: 20, ...options });

test("layout client: tiny graphs on the page, larger ones in a module worker from a Blob URL", async () => {
  await withWorker("works", async () => {
    const layouts = client();
    assert.equal(Object.keys((await layouts.layout(SMALL)).positions).length, 18);
    assert.equal(FakeWorker.made.length, 0);
    const layout = await layouts.layout(BIG);
    assert.equal(Object.keys(layout.positions).length, 200);
    assert.equal(FakeWorker.made.length, 1);
    assert.match(FakeWorker.made[0].url, /^blob:/);
    assert.equal(FakeWorker.made[0].options.type, "module");
    const unknown = { ...BIG, edges: [{ src: "nowhere", dst: BIG.nodes[0].key }] };
    await assert.rejects(layouts.layout(unknown), /graph layout failed: TypeError/);
    assert.equal(layouts.workerFailure(), null);
    layouts.destroy();
    assert.ok(FakeWorker.made[0].terminated);
  });
});

test("on the page: the same layout as the worker's, computed in several tasks while the page keeps its turns", async () => {
  let fromWorker;
  await withWorker("works", async () => {
    fromWorker = await client().layout(BIG);
  });
  const layouts = client({ budgetMs: 0 }); // no Worker here: one slice per task
  let ticks = 0;
  let running = true;
  const tick = () => {
    ticks += 1;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  const onPage = await layouts.layout(BIG);
  running = false;
  assert.deepEqual(onPage, fromWorker);
  assert.match(layouts.workerFailure(), /Web Workers are not available here/);
  assert.ok(ticks >= 5, `the page ran ${ticks} times during the layout`);
});

test("runChunked: steps until the budget is spent, then yields; stops at the next chunk once aborted", async () => {
  function* steps(n) {
    for (let i = 0; i < n; i++) yield i;
    return "done";
  }
  let yields = 0;
  const seen = [];
  const result = await runChunked(steps(5), { budgetMs: 0, yieldTask: async () => yields++, onStep: (i) => seen.push(i) });
  assert.equal(result, "done");
  assert.deepEqual(seen, [0, 1, 2, 3, 4]);
  assert.equal(yields, 5, "one step per task at a budget of 0 ms");
  assert.equal(await runChunked(steps(5), { budgetMs: 1e9, yieldTask: () => assert.fail("yielded") }), "done");
  const controller = new AbortController();
  const aborted = runChunked(steps(100), { budgetMs: 0, signal: controller.signal });
  controller.abort(new Error("replaced"));
  await assert.rejects(aborted, /replaced/);
});

for (const [mode, why] of [
  ["absent", /Web Workers are not available here/],
  ["throws", /the layout worker cannot start here \(SecurityError: workers are not allowed here\)/],
  ["refused", /the layout worker did not start here \(refused\)/],
]) {
  test(`a worker that cannot run (${mode}): the layout is made on the page, and no worker is tried again`, async () => {
    const body = async () => {
      const layouts = client();
      const expected = engine.computeLayout(BIG);
      assert.deepEqual(await layouts.layout(BIG), expected);
      assert.match(layouts.workerFailure(), why);
      assert.deepEqual(await layouts.layout(BIG), expected);
      assert.ok(FakeWorker.made.length <= 1, `${FakeWorker.made.length} workers made`);
      layouts.destroy();
    };
    if (mode === "absent") await body();
    else await withWorker(mode, body);
  });
}

test("a worker that ran and then failed: that layout fails, and the next one gets a fresh worker", async () => {
  await withWorker("crashes", async () => {
    const layouts = client();
    await assert.rejects(layouts.layout(BIG), /graph layout worker failed: Uncaught RangeError/);
    assert.equal(layouts.workerFailure(), null);
    FakeWorker.mode = "works";
    assert.ok((await layouts.layout(BIG)).positions);
    assert.equal(FakeWorker.made.length, 2);
  });
});

test("layout client: a newer request replaces the running one, and destroy rejects what is pending", async () => {
  await withWorker("works", async () => {
    const layouts = client({ mainThreadLimit: 0 });
    const first = layouts.layout(BIG);
    const second = layouts.layout(BIG);
    await assert.rejects(first, StaleLayout);
    assert.ok(FakeWorker.made[0].terminated, "the busy worker was stopped");
    assert.ok((await second).positions);
    const third = layouts.layout(BIG);
    layouts.destroy();
    await assert.rejects(third, StaleLayout);
    await assert.rejects(layouts.layout(BIG), StaleLayout);
  });
});

test("on the page, a newer request stops the running layout at its next chunk", async () => {
  let steps = 0;
  const counting = {
    *layoutSteps(request) {
      for (const step of engine.layoutSteps(request)) {
        steps += 1;
        yield step;
      }
    },
  };
  const replaced = createLayoutClient({ engineSource: null, loadEngine: async () => counting, budgetMs: 0 });
  const first = replaced.layout(BIG);
  while (steps < 3) await new Promise((resolve) => setImmediate(resolve));
  const before = steps;
  const second = replaced.layout(SMALL);
  await assert.rejects(first, StaleLayout);
  await second;
  const small = [...engine.layoutSteps(SMALL)].length;
  const big = [...engine.layoutSteps(BIG)].length;
  assert.ok(before < big - 2, "replaced while it ran");
  assert.ok(steps <= before + 1 + small, `${steps - before - small} steps of the replaced layout ran after it was replaced`);
});
