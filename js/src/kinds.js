/** One line per hook kind: what it captures and when it fires (the toggles' and badges' tooltips); pure, no DOM. */

const MODULE_GRAD = "the gradient of the module's output, when backward reaches it (a tensor hook: in-place ops cannot break it)";
const PARAM_GRAD = "the parameter's gradient, when backward computes it (before it is added to .grad)";

/** @type {Record<string, string>} */
const TIPS = {
  forward_pre: "the module's inputs, before its forward runs",
  forward: "the module's output, each time its forward returns",
  backward_pre: "the gradient of the module's output, before backward goes through the module",
  backward: "the gradients of the module's inputs and output, after backward went through the module",
  grad: MODULE_GRAD,
  legacy_backward: "torch's old backward hook: the gradients of the module's last op only (can be wrong on multi-op modules)",
  global_forward_pre: "every module's inputs, before each forward of every module",
  global_forward: "every module's output, each time a forward of any module returns",
  global_backward_pre: "the gradient of every module's output, before backward goes through each module",
  global_backward: "the gradients of every module's inputs and output, after backward went through each module",
  global_grad: "the gradient of every module's output, when backward reaches it (tensor hooks)",
  param_grad: PARAM_GRAD,
  post_accumulate: "the parameter once its gradient was added to .grad, after each backward",
  node_pre: "the gradients flowing into this autograd node, before it runs",
  node: "the gradients into and out of this autograd node, after it runs",
};

/**
 * What a hook of `kind` captures and when it fires; `family` tells a parameter's "grad" from a module's.
 * @param {string} kind
 * @param {string} [family]
 */
export function kindTip(kind, family = "module") {
  if (kind === "grad" && family === "param") return PARAM_GRAD;
  return TIPS[kind] ?? "";
}

/**
 * The tooltip of a toggle or badge: the kind, then what it captures and when.
 * @param {string} kind
 * @param {string} [family]
 */
export function kindTitle(kind, family = "module") {
  const tip = kindTip(kind, family);
  return tip ? `${kind}: ${tip}` : kind;
}
