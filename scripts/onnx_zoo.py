#!/usr/bin/python3
"""Exports torchvision's CNNs to ONNX, with truths to check carb's import against (docs/onnx.md).

For each model (weights=None: the architecture only, nothing is downloaded; eval mode) it writes
into OUT_DIR

  <name>-bn.onnx      batch norms kept: training=TrainingMode.PRESERVE
  <name>-folded.onnx  batch norms folded into the convs: TrainingMode.EVAL, constant folding

and beside them truths.json, figures computed by PyTorch, independently of carb:

  params   torchvision's sum(p.numel() for p in model.parameters())
  macs     per resolution: multiply-accumulates counted by forward hooks on nn.Conv2d
           (out.numel() * in_channels / groups * kh * kw) and nn.Linear (in x out per row), batch 1
  module_calls  how many times a forward pass calls each kind of leaf module (Conv2d, SiLU, ...)
  output   the model's output for a fixed seeded input (weights seeded too, so the files hold them)
  learnable_in_file  per export, the learnable values its graph holds, counted from the file by
           onnx's Python package (where it is installed): each use of an initializer (through
           Identity nodes, how exporters share equal weights) by Conv, Gemm, MatMul, a bias Add
           and a batch norm's scale and bias, not its running statistics

It is idempotent: a file already there, exported by the same torch version with the same settings,
is kept. One directory holds one setting (resolution, opset, seed); export one model at another
resolution into another directory:

  /usr/bin/python3 scripts/onnx_zoo.py build/onnx-zoo
  /usr/bin/python3 scripts/onnx_zoo.py /tmp/r160 --models resnet50 --resolution 160
  /usr/bin/python3 scripts/onnx_zoo.py /tmp/o17 --models mobilenet_v3_large --opset 17

--tiny DIR exports small custom modules (a few KB each: every operator and fusion carb imports)
instead, the fuzz target's seeds (fuzz/corpus/onnx). --if-torch exits 0 where PyTorch is missing,
leaving OUT_DIR/SKIPPED with the reason, which the tests read to skip and say why.
"""

import argparse
import json
import os
import sys
import tempfile

MODELS = [
    "mobilenet_v2",
    "mobilenet_v3_large",
    "efficientnet_b0",
    "regnet_x_400mf",
    "resnext50_32x4d",
    "densenet121",
    "shufflenet_v2_x1_0",
    "mnasnet1_0",
    "vgg11",
    "squeezenet1_1",
    "resnet50",
]
VARIANTS = ["bn", "folded"]
TRUTHS = "truths.json"
SKIPPED = "SKIPPED"
OUTPUT_SEED = 1234  # the seeded input whose output truths.json keeps
TRUTHS_VERSION = 3  # of truths.json's per-model figures


def library_versions():
    """torch's and torchvision's versions, read without importing them (which takes seconds)."""
    from importlib import metadata

    try:
        return metadata.version("torch"), metadata.version("torchvision")
    except metadata.PackageNotFoundError as missing:
        raise ImportError(f"{missing.name} is not installed") from missing


def forward_with_hooks(torch, model, resolution, hook):
    """Runs one zero image through `model` with `hook` on every leaf module."""
    handles = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            model(torch.zeros(1, 3, resolution, resolution))
    finally:
        for handle in handles:
            handle.remove()


def count_macs(torch, model, resolution):
    """MACs of one image at `resolution`, counted by forward hooks on Conv2d and Linear."""
    total = [0]

    def hook(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            kh, kw = module.kernel_size
            total[0] += output.numel() * (module.in_channels // module.groups) * kh * kw
        elif isinstance(module, torch.nn.Linear):
            rows = inputs[0].numel() // module.in_features
            total[0] += rows * module.in_features * module.out_features

    forward_with_hooks(torch, model, resolution, hook)
    return total[0]


def module_calls(torch, model, resolution):
    """How many times a forward pass calls each kind of leaf module (Conv2d, SiLU, ...)."""
    calls = {}

    def hook(module, inputs, output):
        kind = type(module).__name__
        calls[kind] = calls.get(kind, 0) + 1

    forward_with_hooks(torch, model, resolution, hook)
    return calls


def output_of(torch, model, resolution):
    """The model's output for a seeded normal input (OUTPUT_SEED), rounded to 7 digits."""
    generator = torch.Generator().manual_seed(OUTPUT_SEED)
    example = torch.randn(1, 3, resolution, resolution, generator=generator)
    with torch.no_grad():
        output = model(example)
    return {"input_seed": OUTPUT_SEED, "shape": list(output.shape),
            "values": [round(float(v), 7) for v in output.flatten()]}


def learnable_in_file(path):
    """The learnable values an exported graph holds, each use counted (see the docstring)."""
    import onnx

    model = onnx.load(path)
    sizes = {}
    for tensor in model.graph.initializer:
        size = 1
        for dim in tensor.dims:
            size *= dim
        sizes[tensor.name] = size
    total = 0
    uses = {"Conv": (1, 2), "Gemm": (1, 2), "BatchNormalization": (1, 2), "MatMul": (1,),
            "Add": (0, 1)}
    for node in model.graph.node:
        if node.op_type == "Identity" and node.input[0] in sizes:
            sizes[node.output[0]] = sizes[node.input[0]]
        for k in uses.get(node.op_type, ()):
            if k < len(node.input) and node.input[k] in sizes:
                total += sizes[node.input[k]]
    return total


def export(torch, model, example, path, variant, opset):
    """Writes `model` to `path` atomically (a partial file is never left under the name)."""
    mode = torch.onnx.TrainingMode.PRESERVE if variant == "bn" else torch.onnx.TrainingMode.EVAL
    directory = os.path.dirname(os.path.abspath(path))
    handle, scratch = tempfile.mkstemp(suffix=".onnx.part", dir=directory)
    os.close(handle)
    try:
        torch.onnx.export(model, example, scratch, opset_version=opset, training=mode,
                          do_constant_folding=True, input_names=["input"],
                          output_names=["output"])
        os.chmod(scratch, 0o644)
        os.replace(scratch, path)
    finally:
        if os.path.exists(scratch):
            os.remove(scratch)


def zoo(args):
    out = args.out_dir
    os.makedirs(out, exist_ok=True)
    try:
        torch_version, vision_version = library_versions()
    except ImportError as missing:
        reason = f"PyTorch is not available to {sys.executable}: {missing}"
        if not args.if_torch:
            sys.exit(f"onnx_zoo: {reason}")
        with open(os.path.join(out, SKIPPED), "w") as f:
            f.write(reason + "\n")
        print(f"onnx_zoo: {reason}; wrote {os.path.join(out, SKIPPED)}")
        return
    if os.path.exists(os.path.join(out, SKIPPED)):
        os.remove(os.path.join(out, SKIPPED))
    models = args.models.split(",") if args.models else MODELS
    variants = args.variants.split(",")
    for name in models:
        if name not in MODELS:
            sys.exit(f"onnx_zoo: unknown model '{name}'; one of {', '.join(MODELS)}")
    for variant in variants:
        if variant not in VARIANTS:
            sys.exit(f"onnx_zoo: unknown variant '{variant}'; bn or folded")
    mac_resolutions = sorted({args.resolution} | {int(r) for r in args.mac_resolutions.split(",")
                                                  if r})
    # What the files depend on; truths.json's figures are recomputed (cheaply) when they lack
    # a resolution asked for or TRUTHS_VERSION changed, the files kept.
    setting = {"torch": torch_version, "torchvision": vision_version, "opset": args.opset,
               "resolution": args.resolution, "seed": args.seed}
    truths_path = os.path.join(out, TRUTHS)
    truths = {}
    if os.path.exists(truths_path):
        with open(truths_path) as f:
            truths = json.load(f)
    if truths.get("setting") != setting:
        truths = {"setting": setting, "models": {}}

    torch = None
    for name in models:
        files = {v: os.path.join(out, f"{name}-{v}.onnx") for v in variants}
        known = truths["models"].get(name, {})
        exported = set(known.get("exported", []))
        missing = [v for v in variants if not os.path.exists(files[v]) or v not in exported]
        current = (known.get("truths_version") == TRUTHS_VERSION
                   and all(str(r) in known.get("macs", {}) for r in mac_resolutions))
        if not missing and current:
            continue
        if torch is None:
            import torch
            import torchvision
            torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
        torch.manual_seed(args.seed)
        model = getattr(torchvision.models, name)(weights=None).eval()
        entry = known if current else {
            "truths_version": TRUTHS_VERSION,
            "params": sum(p.numel() for p in model.parameters()),
            "macs": {str(r): count_macs(torch, model, r) for r in mac_resolutions},
            "module_calls": module_calls(torch, model, args.resolution),
            "output": output_of(torch, model, args.resolution),
        }
        for variant in missing:
            print(f"onnx_zoo: exporting {files[variant]}", flush=True)
            example = torch.zeros(1, 3, args.resolution, args.resolution)
            export(torch, model, example, files[variant], variant, args.opset)
            exported.add(variant)
        entry["exported"] = sorted(exported)
        counted = entry.setdefault("learnable_in_file", {})
        for variant in variants:
            if variant in missing or variant not in counted:
                try:
                    counted[variant] = learnable_in_file(files[variant])
                except ImportError:
                    pass  # no onnx package: the tests do without this count
        truths["models"][name] = entry
        # Written after each model, so an interrupted run keeps what it finished.
        with open(truths_path + ".part", "w") as f:
            json.dump(truths, f, indent=1, sort_keys=True)
        os.replace(truths_path + ".part", truths_path)
    print(f"onnx_zoo: {len(models)} models in {out} (torch {torch_version}, opset {args.opset}, "
          f"{args.resolution} px)")


def tiny(args):
    """Small custom modules, a few KB each, that use every operator and fusion carb imports."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    class ConvBnRelu(nn.Module):  # Conv, BatchNormalization, Relu, MaxPool, Flatten, Gemm
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, 2, 1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.pool = nn.MaxPool2d(3, 2, 1)
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            x = self.pool(F.relu(self.bn(self.conv(x))))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    class Mobile(nn.Module):  # Clip (ReLU6), depthwise, hard swish, squeeze-excite, residual Add
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 4, 3, 1, 1)
            self.depthwise = nn.Conv2d(4, 4, 3, 1, 1, groups=4)
            self.reduce = nn.Conv2d(4, 2, 1)
            self.expand = nn.Conv2d(2, 4, 1)
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            x = F.relu6(self.stem(x))
            y = F.hardswish(self.depthwise(x))
            s = F.hardsigmoid(self.expand(F.relu(self.reduce(F.adaptive_avg_pool2d(y, 1)))))
            x = x + y * s
            return self.fc(x.mean([2, 3]))

    class Swish(nn.Module):  # SiLU, sigmoid squeeze-excite, dilation, Dropout, MatMul + Add
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, 1, 2, dilation=2)
            self.se = nn.Conv2d(4, 4, 1)
            self.drop = nn.Dropout(0.2)
            self.weight = nn.Parameter(torch.randn(4, 2))
            self.bias = nn.Parameter(torch.randn(2))

        def forward(self, x):
            x = F.silu(self.conv(x))
            x = x * torch.sigmoid(self.se(F.adaptive_avg_pool2d(x, 1)))
            x = self.drop(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
            return x @ self.weight + self.bias

    class Shuffle(nn.Module):  # chunk (Slice), channel shuffle (Shape, Gather, Div, Reshape,
        def __init__(self):    # Transpose), Concat, grouped conv
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 1)
            self.branch = nn.Conv2d(4, 4, 3, 1, 1, groups=2)

        def forward(self, x):
            x = self.conv(x)
            a, b = x.chunk(2, dim=1)
            x = torch.cat((a, self.branch(b)), dim=1)
            n, c, h, w = x.size()
            x = x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
            return x.mean([2, 3])

    class Dense(nn.Module):  # Concat of many, AveragePool, MaxPool with ceil_mode, Pad
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(3, 2, 1)
            self.b = nn.Conv2d(5, 2, 3, 1, 1)
            self.pad = nn.ZeroPad2d(1)
            self.c = nn.Conv2d(7, 3, 3)

        def forward(self, x):
            x = torch.cat((x, self.a(x)), 1)
            x = torch.cat((x, self.b(x)), 1)
            x = F.avg_pool2d(x, 2, 2)
            x = F.max_pool2d(self.c(self.pad(x)), 3, 2, ceil_mode=True)
            return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)

    class Classifier(nn.Module):  # a vgg-like head: a fixed fc input, x.view(x.size(0), -1)
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 2, 3, 2, 1)
            self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
            self.fc = nn.Linear(2 * 8 * 8, 3)

        def forward(self, x):
            x = self.pool(F.relu(self.conv(x)))
            return self.fc(x.view(x.size(0), -1))

    class Unsupported(nn.Module):  # Softmax: an operator carb refuses
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 2, 1)

        def forward(self, x):
            return torch.softmax(self.conv(x), dim=1)

    out = args.tiny
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(args.seed)
    example = torch.randn(1, 3, 16, 16)
    cases = [("conv_bn_relu", ConvBnRelu, 13), ("mobile", Mobile, 13), ("mobile_o17", Mobile, 17),
             ("swish", Swish, 13), ("shuffle", Shuffle, 13), ("dense", Dense, 13),
             ("classifier", Classifier, 13), ("unsupported_softmax", Unsupported, 13)]
    for name, module, opset in cases:
        model = module().eval()
        for variant in (["bn", "folded"] if name == "conv_bn_relu" else ["bn"]):
            path = os.path.join(out, name + ("" if variant == "bn" else "_folded"))
            export(torch, model, example, path, variant, opset)
            print(f"onnx_zoo: {path} ({os.path.getsize(path)} bytes)")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", nargs="?", help="where the models and truths.json go")
    parser.add_argument("--models", default="", help="comma-separated; default: all 11")
    parser.add_argument("--variants", default="bn,folded", help="bn, folded or both")
    parser.add_argument("--resolution", type=int, default=224, help="input size (default 224)")
    parser.add_argument("--opset", type=int, default=13, choices=range(13, 18),
                        help="ONNX opset, 13 to 17 (default 13)")
    parser.add_argument("--mac-resolutions", default="160",
                        help="further resolutions whose MACs truths.json keeps (default 160)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--if-torch", action="store_true",
                        help="where PyTorch is missing, write OUT_DIR/SKIPPED and exit 0")
    parser.add_argument("--tiny", metavar="DIR", help="export the tiny seed modules into DIR")
    args = parser.parse_args()
    if args.tiny:
        tiny(args)
    elif args.out_dir:
        zoo(args)
    else:
        parser.error("give OUT_DIR or --tiny DIR")


if __name__ == "__main__":
    main()
