import assert from "node:assert/strict";
import { test } from "node:test";
import { attributionShown } from "../src/attribution.js";

const cam = { layer: "layer4", method: "gradcam", caption: "gradcam of class 3 at layer4", error: "", of_layer: true };
const tokens = { layer: "h.0", method: "integrated_gradients", caption: "integrated_gradients of token 17 at h.0", error: "", of_layer: false };

test("a CAM stays when another module is selected, keeps its layer and names the selection", () => {
  assert.deepEqual(attributionShown(cam, "layer4"), { ok: true, error: "", caption: "gradcam of class 3 at layer4" });
  assert.deepEqual(attributionShown(cam, "fc"), { ok: true, error: "", caption: "gradcam of class 3 at layer4 (selected: fc)" });
  assert.equal(attributionShown(cam, "").caption, "gradcam of class 3 at layer4 (selected: (model))");
});

test("a token method's scores stay as they are whatever is selected", () => {
  assert.deepEqual(attributionShown(tokens, "lm_head"), { ok: true, error: "", caption: tokens.caption });
});

test("an error shows at the module it was asked for only; nothing asked shows nothing", () => {
  const failed = { layer: "fc", method: "gradcam", caption: "", error: "gradcam does not fit 'fc'", of_layer: true };
  assert.deepEqual(attributionShown(failed, "fc"), { ok: false, error: "gradcam does not fit 'fc'", caption: "" });
  assert.deepEqual(attributionShown(failed, "layer4"), { ok: false, error: "", caption: "" });
  assert.deepEqual(attributionShown({}, "fc"), { ok: false, error: "", caption: "" });
  assert.deepEqual(attributionShown(null, "fc"), { ok: false, error: "", caption: "" });
});
