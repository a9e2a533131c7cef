import assert from "node:assert/strict";
import { SourceMap } from "node:module";
import { test } from "node:test";

import { buildEngine, buildWidget } from "../build.mjs";
import { computeLayout } from "../src/graph/layout.js";
import { unpackLayout } from "../src/graph/layout_pack.js";
import { layoutRequest } from "../src/graph/layout_request.js";
import { autogradModel } from "../src/graph/model.js";
import { expandSubtree, visibleGraph } from "../src/graph/visible.js";
import { nestedPayload } from "./graph_fixtures.js";

const built = buildWidget({ write: false });

async function output(name) {
  const file = (await built).outputFiles.find((f) => f.path.endsWith(`/hookwidgets/static/${name}`));
  assert.ok(file, `${name} is built`);
  return file.text;
}

const count = (text, part) => text.split(part).length - 1;

test("the widget bundle is minified, and carries dagre once: inside the layout engine", async () => {
  const js = await output("widget.js");
  assert.equal(count(js, "ensureWorker"), 0, "local names are shortened");
  assert.equal(count(js, "Runs layouts in a Web Worker"), 0, "comments are dropped");
  assert.ok(js.length / js.split("\n").length > 1000, "a few long lines");
  assert.equal(count(js, "network-simplex"), 1, "dagre's ranker name occurs once"); // dagre's default ranker
  assert.equal(count(await buildEngine(), "network-simplex"), 1);
  // Minifying renames no name the page's DOM contract (docs/widget-protocol.md) relies on.
  for (const name of ["hw-explorer", "hw-graph-panel", "hw-graph-status", "hw-gnode", "data-node-type"]) {
    assert.ok(js.includes(name), name);
  }
});

test("the source map beside the bundle maps it back to js/src, sources included", async () => {
  const js = await output("widget.js");
  assert.ok(js.trimEnd().endsWith("//# sourceMappingURL=widget.js.map"));
  const map = JSON.parse(await output("widget.js.map"));
  assert.ok(map.sources.length > 20);
  for (const source of map.sources) assert.match(source, /^\.\.\/\.\.\/js\/src\//);
  assert.equal(map.sourcesContent.length, map.sources.length);
  // Where the bundle names the graph's Record button, the map points at the graph panel's source.
  const at = js.indexOf('"hw-graph-record"');
  const before = js.slice(0, at).split("\n");
  const entry = new SourceMap(map).findEntry(before.length - 1, before.at(-1).length);
  assert.equal(entry.originalSource, "../../js/src/view/graph_view.js");
  const line = map.sourcesContent[map.sources.indexOf(entry.originalSource)].split("\n")[entry.originalLine];
  assert.match(line, /hw-graph-record/);
});

test("the layout engine, as build.mjs makes it, says it is ready in a worker and answers each posted request", async () => {
  const source = await buildEngine();
  const posted = [];
  class WorkerGlobalScope {}
  const scope = Object.assign(Object.create(WorkerGlobalScope.prototype), { postMessage: (message) => posted.push(message) });
  const model = autogradModel(nestedPayload(2, 2, 2));
  const request = layoutRequest(model, visibleGraph(model, expandSubtree(model, new Set(), model.root)));
  Object.assign(globalThis, { WorkerGlobalScope, self: scope }); // a worker's globals, while it runs
  try {
    await import(`data:text/javascript,${encodeURIComponent(source)}`);
    assert.deepEqual(posted, [{ ready: true }]);
    scope.onmessage({ data: { id: 7, request } });
    scope.onmessage({ data: { id: 8, request: { nodes: null } } });
  } finally {
    delete globalThis.WorkerGlobalScope;
    delete globalThis.self;
  }
  assert.equal(posted[1].id, 7);
  assert.deepEqual(unpackLayout(request, posted[1].packed), computeLayout(request));
  assert.equal(posted[2].id, 8);
  assert.match(posted[2].error, /TypeError/);
});

test("the same engine imported on the page serves no messages: it only lends its layout", async () => {
  const engine = await import(`data:text/javascript,${encodeURIComponent(await buildEngine())}`);
  assert.equal(typeof engine.layoutSteps, "function");
  assert.equal(globalThis.onmessage, undefined);
});
