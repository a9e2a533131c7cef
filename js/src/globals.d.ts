// Globals tsc cannot see in js/src: what the bundler (js/build.mjs, esbuild) adds, CSS imported for its side effect
// and the layout engine's source inlined by `define`; and the layout worker's scope, which lib "dom" does not declare.
declare module "*.css";
declare const __HW_LAYOUT_ENGINE__: string | undefined;
declare var WorkerGlobalScope: { prototype: object; new (): object } | undefined;
