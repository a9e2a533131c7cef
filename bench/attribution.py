"""Grad-CAM latency: hookwidgets against Captum's LayerGradCam and a plain forward, on a ResNet-18 layout.

Run: ``.venv/bin/python bench/attribution.py [--pairs N] [--threads T]``. stdout is the markdown section for
bench/RESULTS.md (bench/README.md); progress goes to stderr.
Batch 2, 224×224, CPU, eval mode, layer ``layer4``, target class 3. hookwidgets' side is
``ex.gradcam`` (upsampled to 224×224 and scaled to [0, 1], model state saved and restored);
Captum's side is ``LayerGradCam.attribute`` alone (7×7, not upsampled), so the comparison is
at Captum's advantage.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch
from _protocol import (
    MARKDOWN_HEADER,
    MIN_PAIRS,
    WARMUP_PAIRS,
    add_arguments,
    compare,
    machine,
    revision,
    set_threads,
)
from models import ResNet18

from hookwidgets.core import Explorer

BAR = 1.10
LAYER, TARGET = "layer4", 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args()
    if args.pairs < MIN_PAIRS:
        parser.error(f"--pairs must be at least {MIN_PAIRS} (the protocol of bench/_protocol.py)")
    from captum.attr import LayerAttribution, LayerGradCam

    set_threads(args.threads)
    command = " ".join([os.path.relpath(sys.executable), *sys.argv])
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    torch.manual_seed(0)
    model = ResNet18().eval()
    x = torch.randn(2, 3, 224, 224)
    explorer = Explorer(model)
    captum = LayerGradCam(model, model.layer4)

    def ours() -> torch.Tensor:
        return explorer.gradcam(LAYER, x, target=TARGET)

    def theirs() -> torch.Tensor:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Captum warns that it set requires_grad on the input
            return captum.attribute(x, target=TARGET, relu_attributions=True)

    def plain() -> torch.Tensor:
        return model(x)

    reference = LayerAttribution.interpolate(theirs(), (224, 224), interpolate_mode="bilinear")[:, 0]
    reference = (reference - reference.amin((1, 2), keepdim=True)) / (
        reference.amax((1, 2), keepdim=True) - reference.amin((1, 2), keepdim=True)
    )
    difference = (ours() - reference).abs().max().item()
    print(f"max |hookwidgets − Captum (upsampled, scaled)| = {difference:.2e}", file=sys.stderr)
    results = [
        compare("ex.gradcam vs Captum LayerGradCam", theirs, ours, pairs=args.pairs, bar=BAR, show=False),
        compare(
            "Captum LayerGradCam vs plain forward", plain, theirs, pairs=args.pairs, note="issue: 1.19×", show=False
        ),
        compare("ex.gradcam vs plain forward", plain, ours, pairs=args.pairs, note="reference", show=False),
    ]
    explorer.close()
    for result in results:
        print(result.line(), file=sys.stderr)
    lines = [
        "## Grad-CAM latency (issue 5)",
        "",
        f"`{command}`, {date}; {machine()}; hookwidgets at {revision()}. "
        f"1-min load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        f"ResNet-18 layout from `bench/models.py` (random weights, eval mode), batch 2, 224×224, layer `{LAYER}`, "
        f"target class {TARGET}. B = `ex.gradcam` (forward, gradient of the layer output by `torch.autograd.grad`, "
        "CAM upsampled to 224×224 and scaled to [0, 1], model state saved and restored). A = Captum "
        "`LayerGradCam(model, model.layer4).attribute(x, target, relu_attributions=True)`, which returns the 7×7 "
        "map without upsampling: the comparison is at Captum's advantage. The plain forward is `model(x)` with "
        f"autograd on. Interleaved pairs after {WARMUP_PAIRS} warm-ups, {args.pairs} pairs each. Same result: the "
        f"largest difference between hookwidgets' map and Captum's (upsampled bilinearly, scaled) is {difference:.1e}.",
        "",
        MARKDOWN_HEADER,
        *(result.markdown_row() for result in results),
    ]
    print("\n".join(lines))
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
