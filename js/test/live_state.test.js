import assert from "node:assert/strict";
import { test } from "node:test";
import { busyText, cellRunning, everyLayerStats, everyLayerText, lagText, statusLine } from "../src/live_state.js";
import { sampleKinds } from "./fixtures.js";
import { foldTraceback, foldedAs, isOwnFile } from "../src/traceback.js";

test("a view behind the live step says so while the cell runs, and only then", () => {
  assert.equal(lagText(208, { cell: true, step: 239 }), "step 208 of 239, updating…");
  assert.equal(lagText(239, { cell: true, step: 239 }), "");
  assert.equal(lagText(208, { cell: false, step: 239 }), ""); // an older step the user picked
  assert.equal(lagText(null, { cell: true, step: 239 }), "");
  assert.equal(lagText(3, {}), "");
});

test("the inspector says the kernel is busy running a cell, not that no hook fits", () => {
  assert.equal(cellRunning({ cell: true }), true);
  assert.equal(cellRunning({ cell: "yes" }), false);
  assert.equal(cellRunning(null), false);
  assert.match(busyText({ cell: true }, false), /busy running a cell: the selection's hooks show when the cell finishes/);
  assert.match(busyText({ cell: true }, true), /busy running a cell: what you change here applies when/);
  assert.equal(busyText({ cell: false }, false), null);
});

test("Stats on every layer is read from the hooks the explorer holds", () => {
  const hooks = [
    { path: "", kind: "global_forward", action: "stats", foreign: false },
    { path: "", kind: "global_grad", action: "stats", foreign: false },
    { path: "", kind: "global_backward", action: "stats", foreign: true },
    { path: "fc", kind: "global_grad", action: "stats", foreign: false },
  ];
  const kinds = sampleKinds();
  assert.deepEqual(everyLayerStats(hooks, kinds), ["global_forward", "global_grad"]);
  assert.deepEqual(everyLayerStats(hooks.slice(1), kinds), ["global_grad"]);
  assert.deepEqual(everyLayerStats(null, kinds), []);
  assert.deepEqual(everyLayerStats(hooks, null), []); // no table yet
  assert.match(everyLayerText(["global_forward", "global_grad"], kinds), /every layer's output and gradient: Run, or your own training loop/);
  assert.match(everyLayerText(["global_grad"], kinds), /every layer's gradient:/);
  assert.match(everyLayerText(["global_forward"], kinds), /every layer's output:/);
  assert.equal(everyLayerText([], kinds), "");
});

const TRACE = [
  "RuntimeError: boom",
  "",
  "Traceback (most recent call last):",
  '  File "/site-packages/hookwidgets/widget/messages.py", line 150, in run',
  "    output = explorer.run(None)",
  "             ^^^^^^^^^^^^^^^^^^",
  '  File "/site-packages/hookwidgets/core/explorer.py", line 400, in run',
  "    return self.model(x)",
  '  File "/env/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl',
  "    return self._call_impl(*args, **kwargs)",
  '  File "/env/torch/nn/modules/module.py", line 1884, in _call_impl',
  "    return inner()",
  '  File "/tmp/ipykernel_1/123.py", line 7, in forward',
  "    return self.bad(x)",
  '  File "/site-packages/hookwidgets/examples/digits.py", line 9, in forward',
  "    return x @ w",
  "RuntimeError: boom",
].join("\n");

test("a traceback folds the explorer's own frames and keeps the user's, in order", () => {
  const segments = foldTraceback(TRACE);
  assert.deepEqual(
    segments.map((s) => [s.folded, s.label, s.frames]),
    [[false, "", 0], [true, "hookwidgets", 2], [true, "torch's module calls", 2], [false, "", 0]],
  );
  assert.match(segments[1].text, /^ {2}File ".*messages.py".*\n[\s\S]*return self.model\(x\)$/);
  assert.match(segments[3].text, /^ {2}File "\/tmp\/ipykernel_1\/123.py"/);
  assert.equal(segments.map((s) => s.text).join("\n"), TRACE); // nothing lost
  assert.deepEqual(foldTraceback("no frames here").map((s) => s.folded), [false]);
  assert.equal(isOwnFile("C:\\env\\hookwidgets\\core\\explorer.py"), true);
  assert.equal(isOwnFile("/pkgs/hookwidgets/examples/digits.py"), false);
  assert.equal(isOwnFile("/pkgs/torch/nn/modules/module.py"), false);
  assert.equal(foldedAs("/pkgs/torch/nn/modules/module.py"), "torch's module calls");
  assert.equal(foldedAs("/pkgs/torch/nn/functional.py"), null); // where the error is raised stays in view
});

test("the status line says the latest action, else what the view shows, the whole in its title", () => {
  const ran = statusLine({ state: "idle", message: "step 2: forward only", step: 2 }, "features.conv");
  assert.deepEqual(ran, { text: "step 2: forward only", title: "step 2: forward only\nviewing features.conv at step 2" });
  assert.deepEqual(statusLine({ state: "idle", message: "", step: 0 }, ""), { text: "viewing (model)", title: "viewing (model)" });
  assert.equal(statusLine({ message: "", step: 5 }, "fc").text, "viewing fc at step 5");
  assert.equal(statusLine(null, "fc").text, "viewing fc");
});
