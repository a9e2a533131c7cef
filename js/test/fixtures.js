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

function kindRow(kind, family, phase, tip, extra = {}) {
  return { kind, name: kind, family, phase, tip, badge: kind, every_layer: false, common: false, ...extra };
}

/** Rows shaped like the `hook_kinds` traitlet (Python's kind table), in its display order; some of its kinds. */
export function sampleKinds() {
  return [
    kindRow("forward_pre", "module", "forward", "the module's inputs, before its forward runs", { badge: "pre" }),
    kindRow("forward", "module", "forward", "the module's output, each time its forward returns", { badge: "fwd", common: true }),
    kindRow("backward", "module", "backward", "the gradients of the module's inputs and output, after backward went through the module"),
    kindRow("grad", "module", "backward", "the gradient of the module's output, when backward reaches it (a tensor hook: in-place ops cannot break it)", { common: true }),
    kindRow("global_forward", "global", "forward", "every module's output, each time a forward of any module returns", { every_layer: true }),
    kindRow("global_backward", "global", "backward", "the gradients of every module's inputs and output, after backward went through each module"),
    kindRow("global_grad", "global", "backward", "the gradient of every module's output, when backward reaches it (tensor hooks)", { every_layer: true }),
    kindRow("grad", "param", "backward", "the parameter's gradient, when backward computes it (before it is added to .grad)", { name: "param_grad", common: true }),
    kindRow("post_accumulate", "param", "backward", "the parameter once its gradient was added to .grad, after each backward"),
    kindRow("node_pre", "node", "backward", "the gradients flowing into this autograd node, before it runs"),
    kindRow("node", "node", "backward", "the gradients into and out of this autograd node, after it runs"),
  ];
}
