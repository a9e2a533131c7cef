import assert from "node:assert/strict";
import { test } from "node:test";
import { parseEdit } from "../src/edits.js";

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
  assert.match(parseEdit("ablate", "1, -2").error, /channel numbers/);
  assert.equal(parseEdit("unknown", "1"), null);
});
