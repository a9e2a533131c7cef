"""Grad-CAM latency: hookwidgets against Captum's LayerGradCam and a plain forward, on a ResNet-18 layout.

Run: ``.venv/bin/python bench/attribution.py [--pairs N] [--threads T]``.
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
from _protocol import MARKDOWN_HEADER, MIN_PAIRS, add_arguments, compare, machine, revision, set_threads
from models import ResNet18

from hookwidgets.core import Explorer

BAR = 1.10
LAYER, TARGET = "layer4", 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args()
    if args.pairs < MIN_PAIRS:
        parser.error(f"--pairs must be at least {MIN_PAIRS} (DESIGN.md, Measuring)")
    from captum.attr import LayerAttribution, LayerGradCam

    set_threads(args.threads)
    started = time.perf_counter()
    print(f"$ {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')} — {machine()}")
    print(f"hookwidgets at {revision()}")
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
    print(f"max |hookwidgets − Captum (upsampled, scaled)| = {difference:.2e}")
    results = [
        compare("ex.gradcam vs Captum LayerGradCam", theirs, ours, pairs=args.pairs, bar=BAR),
        compare("Captum LayerGradCam vs plain forward", plain, theirs, pairs=args.pairs, note="issue: 1.19×"),
        compare("ex.gradcam vs plain forward", plain, ours, pairs=args.pairs, note="reference"),
    ]
    explorer.close()
    print(f"\n{MARKDOWN_HEADER}")
    for result in results:
        print(result.markdown_row())
    print(f"\ntook {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
