/** A small module tree shaped like the `tree` traitlet, shared by the tests. */

function node(path, cls, children = [], extra = {}) {
  const name = path === "" ? "Net" : path.split(".").pop();
  return { path, name, cls, trainable: 0, frozen: 0, shape: null, dtype: null, children, ...extra };
}

/** Net -> features(Sequential: conv, relu, block(Sequential: conv)), head(Linear). */
export function sampleTree() {
  return node(
    "",
    "Net",
    [
      node("features", "Sequential", [
        node("features.0", "Conv2d", [], { trainable: 448, shape: [1, 16, 32, 32], dtype: "float32" }),
        node("features.1", "ReLU"),
        node("features.block", "Sequential", [node("features.block.0", "Conv2d", [], { frozen: 2320 })]),
      ]),
      node("head", "Linear", [], { trainable: 1290, shape: [1, 10], dtype: "float32" }),
    ],
    { trainable: 1738, frozen: 2320, shape: [1, 10], dtype: "float32" },
  );
}
