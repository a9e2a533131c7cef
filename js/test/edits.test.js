import assert from "node:assert/strict";
import { test } from "node:test";
import { EDITS, NO_RECORD, axesText, editsFor, parseEdit, pickerFields, recordKey, recordLabel } from "../src/edits.js";

test("parseEdit turns the picked edit into the message's list", () => {
  assert.equal(parseEdit("", ""), null);
  assert.deepEqual(parseEdit("zero", "ignored"), ["zero"]);
  assert.deepEqual(parseEdit("scale", " 0.5 "), ["scale", 0.5]);
  assert.deepEqual(parseEdit("clip_norm", "1e-3"), ["clip_norm", 0.001]);
  assert.deepEqual(parseEdit("ablate", "0, 3 7"), ["ablate", [0, 3, 7]]);
});

test("parseEdit names what is wrong with an argument", () => {
  assert.match(parseEdit("scale", "big").error, /scale × needs a number, got "big"/);
  assert.match(parseEdit("clip", "").error, /needs a number/);
  assert.match(parseEdit("ablate", "1, -2").error, /ablate indices needs indices such as "0, 3", got "1, -2"/);
  assert.equal(parseEdit("unknown", "1"), null);
});

test("ablate takes a dim, checked against the output's rank when it is known", () => {
  assert.deepEqual(parseEdit("ablate", "2", { dim: "-1", rank: 3 }), ["ablate", [2], -1]);
  assert.deepEqual(parseEdit("ablate", "0, 4", { dim: " 1 " }), ["ablate", [0, 4], 1]);
  assert.deepEqual(parseEdit("ablate", "0", { dim: "7" }), ["ablate", [0], 7], "rank unknown: the engine checks");
  assert.deepEqual(parseEdit("ablate", "0", { dim: "", rank: 3 }), ["ablate", [0]], "no dim: the engine's default");
  assert.match(parseEdit("ablate", "0", { dim: "x" }).error, /ablate's dim must be an integer such as 1 or -1, got "x"/);
  assert.match(parseEdit("ablate", "0", { dim: "1.5" }).error, /must be an integer/);
  assert.equal(
    parseEdit("ablate", "0", { dim: "3", rank: 3 }).error,
    "ablate's dim 3 is out of range: the output has 3 dims (0 to 2, or -3 to -1)",
  );
  assert.match(parseEdit("ablate", "0", { dim: "-4", rank: 3 }).error, /dim -4 is out of range/);
  assert.match(parseEdit("ablate", "0", { dim: "1", rank: 1 }).error, /the output has 1 dim \(0, or -1\)/);
});

test("ablate heads checks its head numbers against the module's head count", () => {
  assert.deepEqual(parseEdit("ablate_heads", "2, 0", { heads: 4 }), ["ablate_heads", [2, 0]]);
  assert.equal(
    parseEdit("ablate_heads", "1, 4", { heads: 4 }).error,
    "ablate heads: head 4 is out of range, this module has 4 (0 to 3)",
  );
  assert.match(parseEdit("ablate_heads", "one", { heads: 4 }).error, /ablate heads needs head numbers such as "0, 3"/);
  assert.match(parseEdit("ablate_heads", "0", { heads: null }).error, /no heads the explorer can find/);
});

test("replace and mean_ablate send the chosen record's step and call; none chosen says how to get one", () => {
  assert.deepEqual(parseEdit("replace", "", { record: "3/0" }), ["replace", { step: 3, call: 0 }]);
  assert.deepEqual(parseEdit("mean_ablate", "ignored", { record: "12/2" }), ["mean_ablate", { step: 12, call: 2 }]);
  assert.deepEqual(parseEdit("replace", "", { record: "" }), { error: NO_RECORD });
  assert.deepEqual(parseEdit("mean_ablate", ""), { error: NO_RECORD });
  assert.match(NO_RECORD, /capture its forward, Run, then pick the run/);
});

test("editsFor offers ablate heads only with a head count, and the patches only on a module", () => {
  const names = (sel) => editsFor(sel).map((spec) => spec.name);
  const base = ["", "scale", "clip", "clip_norm", "zero", "ablate"];
  assert.deepEqual(names(null), base);
  assert.deepEqual(names({ family: "param", heads: null }), base);
  assert.deepEqual(names({ family: "module", heads: null }), [...base, "replace", "mean_ablate"]);
  assert.deepEqual(names({ family: "module", heads: 4 }), EDITS.map((spec) => spec.name));
});

test("records and axes read as the picker shows them", () => {
  const record = { step: 3, call: 0, shape: [2, 8, 32] };
  assert.equal(recordKey(record), "3/0");
  assert.equal(recordLabel(record), "step 3 · 2×8×32");
  assert.equal(recordLabel({ step: 4, call: 1, shape: [] }), "step 4, call 1 · scalar");
  assert.equal(
    axesText(["batch", "tokens", "features"], [2, 8, 32]),
    "dim 0: batch (2) · dim 1: tokens (8) · dim 2 or -1: features (32)",
  );
  assert.equal(axesText(["batch", ""], [2, 5]), "dim 0: batch (2) · dim 1 or -1: size (5)");
  assert.equal(axesText(null, [2, 8]), "");
  assert.equal(axesText(["batch", "features"], null), "");
});

test("the picker shows an attached hook's edit so that changing one field keeps the others", () => {
  assert.deepEqual(pickerFields([]), { name: "", arg: "", dim: "" });
  assert.deepEqual(pickerFields(null), { name: "", arg: "", dim: "" });
  assert.deepEqual(pickerFields([["scale", 0.5]]), { name: "scale", arg: "0.5", dim: "" });
  assert.deepEqual(pickerFields([["zero"]]), { name: "zero", arg: "", dim: "" });
  assert.deepEqual(pickerFields([["ablate", [0, 3], -1]]), { name: "ablate", arg: "0, 3", dim: "-1" });
  assert.deepEqual(pickerFields([["ablate_heads", [1, 2]]]), { name: "ablate_heads", arg: "1, 2", dim: "" });
  assert.equal(pickerFields([["scale", 2], ["clip", 1]]), null); // several edits: not one picker's
  assert.equal(pickerFields([["nope"]]), null);
});
