import assert from "node:assert/strict";
import { test } from "node:test";

import { createRequests } from "../src/requests.js";

/** A stand-in for the anywidget model: records what the page sends, delivers what the kernel sends. */
function fakeModel() {
  const listeners = new Map();
  return {
    sent: [],
    send(content) {
      this.sent.push(content);
    },
    on(event, callback) {
      listeners.set(event, [...(listeners.get(event) ?? []), callback]);
    },
    off(event, callback) {
      listeners.set(event, (listeners.get(event) ?? []).filter((c) => c !== callback));
    },
    fromKernel(content) {
      for (const callback of listeners.get("msg:custom") ?? []) callback(content, []);
    },
    listening() {
      return (listeners.get("msg:custom") ?? []).length;
    },
  };
}

test("each request carries a fresh request_id and resolves with its own reply", async () => {
  const model = fakeModel();
  const requests = createRequests(model);
  const first = requests.send({ type: "attach", path: "fc", kind: "forward" });
  const second = requests.send({ type: "run" });
  const [a, b] = model.sent;
  assert.equal(a.type, "attach");
  assert.equal(a.kind, "forward");
  assert.notEqual(a.request_id, b.request_id);
  model.fromKernel({ type: "reply", request_id: b.request_id, ok: false, error: "run failed: RuntimeError" });
  model.fromKernel({ type: "reply", request_id: a.request_id, ok: true, error: "" });
  assert.deepEqual(await second, { ok: false, error: "run failed: RuntimeError" });
  assert.deepEqual(await first, { ok: true, error: "" });
});

test("replies to other views' requests, and other messages, leave a request pending", async () => {
  const model = fakeModel();
  const mine = createRequests(model);
  const theirs = createRequests(model); // a second display of the same widget
  let settled = false;
  mine.send({ type: "graph" }).then(() => {
    settled = true;
  });
  theirs.send({ type: "graph" });
  const [, other] = model.sent;
  model.fromKernel({ type: "reply", request_id: other.request_id, ok: true, error: "" });
  model.fromKernel({ type: "something else", request_id: model.sent[0].request_id });
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(settled, false);
  assert.notEqual(model.sent[0].request_id, other.request_id);
});

test("a second reply with the same id is ignored, and destroy stops listening", async () => {
  const model = fakeModel();
  const requests = createRequests(model);
  let answers = 0;
  requests.send({ type: "dismiss_error" }).then(() => {
    answers += 1;
  });
  const { request_id } = model.sent[0];
  model.fromKernel({ type: "reply", request_id, ok: true, error: "" });
  model.fromKernel({ type: "reply", request_id, ok: true, error: "" });
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(answers, 1);
  requests.destroy();
  assert.equal(model.listening(), 0);
});

test("every view sends through requests, with a `type`: none calls model.send itself", async () => {
  const { readdirSync, readFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { fileURLToPath } = await import("node:url");
  const src = fileURLToPath(new URL("../src", import.meta.url));
  const files = (dir) =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? files(join(dir, entry.name)) : entry.name.endsWith(".js") ? [join(dir, entry.name)] : [],
    );
  const direct = [];
  const sends = [];
  for (const file of files(src)) {
    const text = readFileSync(file, "utf8");
    if (!file.endsWith("requests.js") && text.includes("model.send(")) direct.push(file);
    for (const match of text.matchAll(/requests\.send\(\{ (\w+):/g)) sends.push(`${file}: ${match[1]}`);
  }
  assert.deepEqual(direct, []);
  assert.ok(sends.length >= 10, sends.join("\n"));
  assert.deepEqual(
    sends.filter((s) => !s.endsWith(": type")),
    [],
  );
});
