/** Compact graph payloads shaped like the `graph` traitlet (see hookwidgets/widget/graph_panel.py). */

/**
 * A chain of `stages` × `blocks` blocks; each block "s.b" holds `ops` chained op nodes in module "s.b"
 * plus one AccumulateGrad for "s.b.weight". Edges follow the gradient (consumer -> producer).
 */
export function nestedPayload(stages, blocks, ops) {
  const modules = [""];
  const parents = [-1];
  const ids = [];
  const op = [];
  const module = [];
  const params = [];
  const edges = [];
  const saved = [];
  let previous = -1;
  for (let s = 0; s < stages; s++) {
    modules.push(`${s}`);
    parents.push(0);
    const stage = modules.length - 1;
    for (let b = 0; b < blocks; b++) {
      modules.push(`${s}.${b}`);
      parents.push(stage);
      const block = modules.length - 1;
      const param = ids.length;
      ids.push(`${s}.${b}/AccumulateGrad#weight`);
      op.push(0);
      module.push(block);
      params.push([param, `${s}.${b}.weight`]);
      for (let k = 0; k < ops; k++) {
        const index = ids.length;
        ids.push(`${s}.${b}/MulBackward0#${k}`);
        op.push(1);
        module.push(block);
        if (previous >= 0) edges.push([index, previous]);
        if (k === 0) edges.push([index, param]);
        if (k === 0) saved.push([index, 64, 2, [["self", [2, 8], "float32", 64, null], ["other", [8], "float32", 32, `parameter ${s}.${b}.weight`]]]);
        previous = index;
      }
    }
  }
  return {
    ids,
    op,
    ops: ["AccumulateGrad", "MulBackward0"],
    module,
    modules,
    parents,
    params,
    saved,
    edges,
    outputs: [previous],
  };
}

/** The dataflow of a small CNN, as `ex.dataflow()` gives it. */
export function cnnDataflow() {
  return {
    nodes: [
      { module: "features.conv", ops: 1 },
      { module: "features.bn", ops: 1 },
      { module: "features.act", ops: 1 },
      { module: "head.pool", ops: 1 },
      { module: "head.flatten", ops: 1 },
      { module: "head.fc", ops: 2 },
      { module: "<output>", ops: 0 },
    ],
    edges: [
      { src: "features.conv", dst: "features.bn", tensors: 1, uses: 1, shapes: [[2, 4, 8, 8]] },
      { src: "features.bn", dst: "features.act", tensors: 1, uses: 1, shapes: [[2, 4, 8, 8]] },
      { src: "features.act", dst: "head.pool", tensors: 1, uses: 1, shapes: [[2, 4, 8, 8]] },
      { src: "head.pool", dst: "head.flatten", tensors: 1, uses: 1, shapes: [[2, 4, 2, 2]] },
      { src: "head.flatten", dst: "head.fc", tensors: 1, uses: 1, shapes: [[2, 16]] },
      { src: "head.fc", dst: "<output>", tensors: 1, uses: 1, shapes: [] },
    ],
  };
}

/**
 * Every op in one module (the root), as a loop of `x = x + tanh(x * w_i)` records it: `steps` × (AccumulateGrad of
 * w_i, Mul, Tanh, Add). One container of 4 × `steps` nodes: the layout cuts it into slices.
 */
export function flatPayload(steps) {
  const ids = [];
  const op = [];
  const edges = [];
  const params = [];
  const add = (id, kind) => {
    ids.push(id);
    op.push(kind);
    return ids.length - 1;
  };
  let previous = -1;
  for (let i = 0; i < steps; i++) {
    const weight = add(`/AccumulateGrad#w${i}`, 0);
    params.push([weight, `w${i}`]);
    const mul = add(`/MulBackward0#${i}`, 1);
    const tanh = add(`/TanhBackward0#${i}`, 2);
    const sum = add(`/AddBackward0#${i}`, 3);
    edges.push([mul, weight], [tanh, mul], [sum, tanh]);
    if (previous >= 0) edges.push([mul, previous], [sum, previous]);
    previous = sum;
  }
  return {
    ids,
    op,
    ops: ["AccumulateGrad", "MulBackward0", "TanhBackward0", "AddBackward0"],
    module: ids.map(() => 0),
    modules: [""],
    parents: [-1],
    params,
    saved: [],
    edges,
    outputs: [previous],
  };
}
