/** A layout as typed arrays, transferred from the worker rather than copied: receiving nested objects cost the page ~80 ms for 500 nodes. */

/** @typedef {import("./layout_request.js").LayoutRequest} LayoutRequest */
/** @typedef {import("./layout.js").Layout} Layout */
/**
 * A layout in arrays: 4 numbers per rect (nodes, then boxes; NaN for none), edges' points and where each starts.
 * @typedef {{rects: Float64Array, points: Float64Array, offsets: Uint32Array, x: number, y: number, width: number,
 *   height: number}} PackedLayout
 */

/**
 * The layout as typed arrays: rects (4 per node, then box), edge points, offsets.
 * @param {LayoutRequest} request
 * @param {Layout} layout
 * @returns {PackedLayout}
 */
export function packLayout(request, layout) {
  const keys = [...request.nodes, ...request.boxes].map((item) => item.key);
  const rects = new Float64Array(keys.length * 4);
  keys.forEach((key, i) => rects.set(layout.positions[key] ?? [NaN, NaN, 0, 0], i * 4));
  const offsets = new Uint32Array(layout.edges.length + 1);
  layout.edges.forEach((edge, i) => {
    offsets[i + 1] = offsets[i] + edge.points.length * 2;
  });
  const points = new Float64Array(offsets[layout.edges.length]);
  layout.edges.forEach((edge, i) => points.set(edge.points.flat(), offsets[i]));
  const { x, y, width, height } = layout;
  return { rects, points, offsets, x, y, width, height };
}

/**
 * computeLayout's result back from packLayout's arrays and the request they were made for.
 * @param {LayoutRequest} request
 * @param {PackedLayout} packed
 * @returns {Layout}
 */
export function unpackLayout(request, packed) {
  /** @type {Layout["positions"]} */
  const positions = {};
  [...request.nodes, ...request.boxes].forEach((item, i) => {
    const rect = Array.from(packed.rects.subarray(i * 4, i * 4 + 4));
    if (!Number.isNaN(rect[0])) positions[item.key] = rect;
  });
  const edges = request.edges.map((edge, i) => {
    const flat = packed.points.subarray(packed.offsets[i], packed.offsets[i + 1]);
    /** @type {number[][]} */
    const points = [];
    for (let k = 0; k < flat.length; k += 2) points.push([flat[k], flat[k + 1]]);
    return { src: edge.src, dst: edge.dst, points };
  });
  const { x, y, width, height } = packed;
  return { positions, edges, x, y, width, height };
}
