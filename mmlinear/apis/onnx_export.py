"""ONNX export of mmpretrain classifiers, mmseg segmentors and mmdet detectors built on mmlinear.

The graph takes the normalised (B, 3, H, W) image, as mmdeploy's graphs do (the data
preprocessor's normalisation and padding stay outside), and returns what
``model(inputs, mode='tensor')`` returns: the classification scores of a classifier, the
segmentation logits of a segmentor, and the backbone + neck features of a detector (whose
``mode='tensor'`` forward needs data samples for the RoI heads). docs/deployment.md describes
the graphs and their costs.

The export goes through ``torch.export`` and the dynamo ONNX exporter (the TorchScript exporter
cannot translate WeightFormer's ``adaptive_avg_pool2d``). mmlinear's ops run their PyTorch
references while a graph is exported (``mmlinear.utils.ext_loader.exporting``), so the graph
holds standard ONNX operators only, which :func:`check_onnx_graph` asserts.
"""
import os
import os.path as osp
import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import sympy
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope
from torch import Tensor, nn

from .config_loading import toolbox_scope

# The dynamo exporter translates to opset 18 and up; lower requests are silently kept at 18.
MIN_OPSET = 18
DEFAULT_OPSET = 18
# ONNX domains of standard operators ('' and its alias 'ai.onnx').
STANDARD_DOMAINS = ('', 'ai.onnx')
INPUT_NAME = 'input'
# The symbolic input dimensions of a dynamic graph, by axis.
DYNAMIC_AXES = {0: 'batch', 2: 'height', 3: 'width'}


class ExportError(ValueError):
    """A model, shape or option that cannot be exported (the message says why and what works)."""


class TensorOutputModel(nn.Module):
    """The traced function of a toolbox model: normalised images in, raw tensors out.

    Args:
        model (nn.Module): An mmpretrain classifier, mmseg segmentor or mmdet detector.
        task (str): 'mmpretrain', 'mmseg' or 'mmdet' (the config's default scope).
    """

    def __init__(self, model: nn.Module, task: str) -> None:
        super().__init__()
        self.model = model
        self.task = task

    def forward(self, inputs: Tensor) -> Union[Tensor, Tuple[Tensor, ...]]:
        """Args:
            inputs (Tensor): (B, 3, H, W) normalised images.

        Returns:
            Tensor | tuple[Tensor]: (B, num_classes) scores, (B, num_classes, H', W')
            segmentation logits, or the detector's neck levels (B, C, H / s, W / s).
        """
        if self.task == 'mmdet':
            return self.model.extract_feat(inputs)
        return self.model(inputs, mode='tensor')


def output_names(task: str, num_outputs: int) -> List[str]:
    """Names of the graph outputs: ``cls_score``, ``seg_logits`` or ``feat0``, ``feat1``, ..."""
    if task == 'mmdet':
        return [f'feat{i}' for i in range(num_outputs)]
    return ['cls_score' if task == 'mmpretrain' else 'seg_logits']


def _exportable_types(task: str) -> tuple:
    """The model classes of a toolbox whose tensor-mode forward the export supports."""
    if task == 'mmpretrain':
        from mmpretrain.models import ImageClassifier
        return (ImageClassifier, )
    if task == 'mmseg':
        from mmseg.models.segmentors import BaseSegmentor
        return (BaseSegmentor, )
    from mmdet.models.detectors import BaseDetector
    return (BaseDetector, )


def build_export_model(cfg: Config,
                       checkpoint: Optional[str] = None,
                       active_cores: Optional[int] = None) -> TensorOutputModel:
    """Build a config's model in eval mode and wrap it for export.

    Args:
        cfg (Config): A classifier (mmpretrain), segmentor (mmseg) or detector (mmdet) config.
        checkpoint (str, optional): A checkpoint of the whole model, loaded strictly. Without it
            the weights are the model's initialisation.
        active_cores (int, optional): VECA's core budget for the exported graph (one of the
            backbone's allowed budgets); defaults to the config's.

    Returns:
        TensorOutputModel: The model to trace.

    Raises:
        ExportError: If the config's scope or model type cannot be exported, or
            ``active_cores`` is given for a backbone that has no core budget or is not
            one of its budgets.
        FileNotFoundError: If ``checkpoint`` is given and is not a file.
    """
    # Checked first: a mistyped path should not wait for the model to be built.
    if checkpoint is not None and not osp.isfile(checkpoint):
        raise FileNotFoundError(f"checkpoint not found: {checkpoint} (give a checkpoint file, "
                                "or 'none' for the config's initial weights)")
    import mmlinear.models  # noqa: F401  (registers the backbones and the mmlinear:: config scope)
    from mmlinear.models import VECA
    try:
        task = toolbox_scope(cfg)
    except ValueError as error:
        raise ExportError(str(error)) from None
    init_default_scope(task)
    model_cfg = cfg.model.copy()
    # As mmengine's Runner: a top-level data_preprocessor is the model's unless it sets one.
    if cfg.get('data_preprocessor') is not None:
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    model = MODELS.build(model_cfg)
    allowed = _exportable_types(task)
    if not isinstance(model, allowed):
        raise ExportError(f'cannot export a {type(model).__name__} ({task}): the export supports '
                          f'{", ".join(t.__name__ for t in allowed)} models of {task}, and '
                          f'classifiers (mmpretrain), segmentors (mmseg), detectors (mmdet)')
    if checkpoint is None:
        model.init_weights()
    else:
        from mmengine.runner import load_checkpoint
        load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    if active_cores is not None:
        backbone = getattr(model, 'backbone', None)
        if not isinstance(backbone, VECA):
            raise ExportError(f'active_cores applies to VECA backbones only, this model has a '
                              f'{type(backbone).__name__}')
        try:
            backbone.active_cores = active_cores
        except ValueError as error:
            raise ExportError(str(error)) from None
    return TensorOutputModel(model, task).eval()


def required_divisor(cfg: Config) -> int:
    """The side multiple the exported graph's input must have, from the data preprocessor.

    mmdet and mmseg pad every batch to ``pad_size_divisor`` / ``size_divisor`` before the
    backbone; a graph traced at another size would see inputs the model never sees.

    Returns:
        int: The divisor (1 when the preprocessor pads to none).
    """
    pre = cfg.model.get('data_preprocessor') or cfg.get('data_preprocessor') or {}
    return int(pre.get('pad_size_divisor') or pre.get('size_divisor') or 1)


def check_export_shape(shape: Sequence[int], divisor: int = 1) -> Tuple[int, int]:
    """Validate the (H, W) of the export input.

    Raises:
        ExportError: If a side is not a positive integer multiple of ``divisor``.
    """
    if len(shape) != 2 or any(not isinstance(s, int) or s <= 0 for s in shape):
        raise ExportError(f'shape must be two positive integers (H, W), got {tuple(shape)}')
    if any(s % divisor for s in shape):
        raise ExportError(f'shape {tuple(shape)} is not a multiple of {divisor}: the model pads '
                          f'its inputs to multiples of {divisor} (data_preprocessor), give '
                          f'H and W among {divisor}, {2 * divisor}, {3 * divisor}, ...')
    return int(shape[0]), int(shape[1])


def check_opset(opset: int) -> int:
    """Validate an ONNX opset for the dynamo exporter.

    Raises:
        ExportError: If ``opset`` is outside [MIN_OPSET, the installed onnx's newest].
    """
    import onnx
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= newest:
        raise ExportError(f'opset must be an integer in [{MIN_OPSET}, {newest}] (the exporter '
                          f'translates to opset {MIN_OPSET} and up; onnx {onnx.__version__} '
                          f'knows up to {newest}), got {opset!r}')
    return opset


def _pooling_matrix(in_size: Union[int, torch.SymInt], out_size: int, dtype: torch.dtype,
                    device: torch.device) -> Tensor:
    """(out_size, in_size) averaging weights of adaptive pooling's bins along one side.

    Bin i covers [floor(i * n / k), ceil((i + 1) * n / k)), as ``adaptive_avg_pool2d``.
    """
    index = torch.arange(out_size, device=device)
    start = torch.div(index * in_size, out_size, rounding_mode='floor')
    end = torch.div((index + 1) * in_size + out_size - 1, out_size, rounding_mode='floor')
    position = torch.arange(in_size, device=device)
    member = (position >= start[:, None]) & (position < end[:, None])
    return member.to(dtype) / (end - start).to(dtype)[:, None]


def adaptive_avg_pool2d_any_size(x: Tensor, output_size: Sequence[int]) -> Tensor:
    """``adaptive_avg_pool2d`` as two matrix products, exact at every input size.

    PyTorch's decomposition picks its gather pattern from the traced size (whether the bins
    overlap), so a dynamic graph traced at one size averages the wrong windows at others.

    Args:
        x (Tensor): (..., H, W).
        output_size (Sequence[int]): (k_h, k_w).

    Returns:
        Tensor: (..., k_h, k_w).
    """
    rows = _pooling_matrix(x.shape[-2], output_size[0], x.dtype, x.device)
    cols = _pooling_matrix(x.shape[-1], output_size[1], x.dtype, x.device)
    return rows @ x @ cols.transpose(0, 1)


def depthwise_conv2d_symbolic_groups(x: Tensor,
                                     weight: Tensor,
                                     bias: Optional[Tensor] = None,
                                     stride: Sequence[int] = (1, 1),
                                     padding: Sequence[int] = (0, 0),
                                     dilation: Sequence[int] = (1, 1),
                                     groups: Union[int, torch.SymInt] = 1) -> Tensor:
    """A depthwise convolution whose group count depends on the batch, as shifted products.

    ``dynamic_dwconv2d``'s reference folds the batch into the channels (groups = B * C); ONNX
    needs the group count as a constant, so with a dynamic batch the k x k taps are summed as
    shifted, per-channel scaled copies of the padded map instead. Other convolutions are left
    to the exporter (``NotImplemented``).

    Args:
        x (Tensor): (1, G, H, W), G = groups.
        weight (Tensor): (G, 1, k_h, k_w).
        bias (Tensor, optional): (G,).
        stride, padding, dilation, groups: As ``torch.nn.functional.conv2d``.

    Returns:
        Tensor: (1, G, H', W').
    """
    if not isinstance(groups, torch.SymInt) or weight.shape[1] != 1 or tuple(stride) != (1, 1) \
            or tuple(dilation) != (1, 1):
        return NotImplemented
    k_h, k_w = weight.shape[-2:]
    padded = F.pad(x, (padding[1], padding[1], padding[0], padding[0]))
    out_h, out_w = padded.shape[-2] - k_h + 1, padded.shape[-1] - k_w + 1
    taps = weight[:, 0]
    out = None
    for u in range(k_h):
        for v in range(k_w):
            term = padded[..., u:u + out_h, v:v + out_w] * taps[:, u, v, None, None]
            out = term if out is None else out + term
    return out if bias is None else out + bias[:, None, None]


def export_decompositions() -> dict:
    """The decompositions applied before translation, for graphs valid at every size."""
    aten = torch.ops.aten
    return {
        aten.adaptive_avg_pool2d.default: adaptive_avg_pool2d_any_size,
        aten._adaptive_avg_pool2d.default: adaptive_avg_pool2d_any_size,
        aten.conv2d.default: depthwise_conv2d_symbolic_groups,
    }


def _size_names(program: torch.export.ExportedProgram) -> Dict[str, str]:
    """Symbol of each dynamic input dimension (e.g. 's53') -> its name ('height')."""
    placeholder = next(n for n in program.graph.nodes
                       if n.op == 'placeholder' and n.name in program.graph_signature.user_inputs)
    names = {}
    for axis, size in enumerate(placeholder.meta['val'].shape):
        if isinstance(size, torch.SymInt) and axis in DYNAMIC_AXES:
            names[str(size.node.expr)] = DYNAMIC_AXES[axis]
    return names


def _probe_sizes(traced: Dict[str, int]) -> List[Dict[str, int]]:
    """Sizes at and above the traced ones (other residues too) to evaluate conditions at."""
    return [{
        name: value * scale + offset
        for name, value in traced.items()
    } for scale, offset in ((1, 0), (1, 1), (2, 3), (3, 5), (5, 1))]


def check_size_specialisation(program: torch.export.ExportedProgram, shape: Tuple[int,
                                                                                  int]) -> None:
    """Refuse a dynamic graph that holds only at some sizes.

    Where the model branches on a size and the traced branch is the one for an equality
    (a module that skips a resize when the input already has the target size), the exported
    program keeps the branch and an assertion of the equality, which ONNX drops: the graph
    would then compute wrong values at other sizes. (InfViT's position table avoids this by
    always interpolating while exporting, see ``resize_pos_embed``.) An equality that holds
    at every larger size (e.g. ``min(C, C * k) == C``, a lower bound) is a range and is kept.

    Raises:
        ExportError: Naming the equalities that fail at some size above the traced one.
    """
    names = _size_names(program)
    traced = {'batch': 2, 'height': shape[0], 'width': shape[1]}
    probes = _probe_sizes({symbol: traced[name] for symbol, name in names.items()})
    equalities = []
    for node in program.graph.nodes:
        if node.target is not torch.ops.aten._assert_scalar.default:
            continue
        condition = node.args[0].meta.get('val') if hasattr(node.args[0], 'meta') else None
        expr = getattr(getattr(condition, 'node', None), 'expr', None)
        if not isinstance(expr, sympy.Eq):
            continue
        holds = all(
            expr.subs({symbol: probe.get(str(symbol), symbol)
                       for symbol in expr.free_symbols}) is sympy.true for probe in probes)
        if not holds:
            text = str(expr)
            for symbol, name in names.items():
                text = re.sub(rf'\b{symbol}\b', name, text)
            equalities.append(text)
    if equalities:
        raise ExportError(f'the model takes a size-specific branch at {shape[0]} x {shape[1]}: '
                          f'the traced graph holds only where {"; ".join(equalities)}. Export '
                          f'with --dynamic-shape at another --shape, or without --dynamic-shape '
                          f'for this size only')


def _rename_dynamic_dims(onnx_model, names: Dict[str, str]) -> None:
    """Give the graph's symbolic dimensions their names (batch, height, width).

    Args:
        onnx_model (onnx_ir.Model): The exported model (onnxscript's IR, which
            ``ONNXProgram.save`` writes; ``model_proto`` is a copy).
        names (dict[str, str]): Symbol -> name, from :func:`_size_names`.
    """
    import onnx_ir  # onnxscript's IR package, installed with it
    symbol = re.compile(r'\b(' + '|'.join(map(re.escape, names)) + r')\b')
    for value in [*onnx_model.graph.inputs, *onnx_model.graph.outputs]:
        if value.shape is None:
            continue
        value.shape = onnx_ir.Shape([
            onnx_ir.SymbolicDim(symbol.sub(lambda match: names[match.group(1)], dim.value))
            if isinstance(dim, onnx_ir.SymbolicDim) and dim.value else dim for dim in value.shape
        ])


def export_onnx(model: nn.Module,
                out_file: str,
                shape: Tuple[int, int],
                names: Sequence[str],
                dynamic: bool = False,
                opset: int = DEFAULT_OPSET) -> None:
    """Trace ``model`` on a (B, 3, H, W) input and write its ONNX graph.

    Args:
        model (nn.Module): In eval mode; takes one (B, 3, H, W) tensor.
        out_file (str): The .onnx file to write (its folder is created if missing).
        shape (tuple[int, int]): (H, W) of the traced input.
        names (Sequence[str]): Names of the outputs.
        dynamic (bool): Make B, H and W symbolic (traced at B = 2, as PyTorch specialises
            sizes 0 and 1); else the graph takes (1, 3, H, W) only. Defaults to False.
        opset (int): ONNX opset. Defaults to 18.

    Raises:
        ExportError: If the opset is not supported, or a dynamic graph would hold only at
            some sizes (:func:`check_size_specialisation`).
    """
    check_opset(opset)
    inputs = (torch.randn(2 if dynamic else 1, 3, *shape), )
    dynamic_shapes = ({axis: torch.export.Dim.AUTO for axis in DYNAMIC_AXES}, ) if dynamic \
        else None
    with torch.no_grad():
        # Guards the tracer cannot state as ranges stay visible as assertions in the graph.
        program = torch.export.export(
            model,
            inputs,
            dynamic_shapes=dynamic_shapes,
            strict=False,
            prefer_deferred_runtime_asserts_over_guards=True)
        if dynamic:
            check_size_specialisation(program, shape)
        program = program.run_decompositions(export_decompositions())
        onnx_program = torch.onnx.export(
            program,
            inputs,
            dynamo=True,
            opset_version=opset,
            input_names=[INPUT_NAME],
            output_names=list(names),
            verbose=False)
    if dynamic:
        _rename_dynamic_dims(onnx_program.model, _size_names(program))
    os.makedirs(osp.dirname(osp.abspath(out_file)), exist_ok=True)
    onnx_program.save(out_file)


def check_onnx_graph(onnx_file: str) -> List[str]:
    """Run ``onnx.checker`` on a file and check that it holds standard operators only.

    Returns:
        list[str]: The operator types of the graph, sorted.

    Raises:
        ExportError: If a node belongs to another domain or the file has local functions.
    """
    import onnx
    model_proto = onnx.load(onnx_file)
    onnx.checker.check_model(model_proto, full_check=True)
    custom = sorted({
        f'{n.domain}::{n.op_type}'
        for n in model_proto.graph.node if n.domain not in STANDARD_DOMAINS
    } | {f'function {f.domain}::{f.name}'
         for f in model_proto.functions})
    if custom:
        raise ExportError(f'{onnx_file} holds non-standard operators {custom}; only the domains '
                          f'{STANDARD_DOMAINS} are expected')
    return sorted({n.op_type for n in model_proto.graph.node})


def compare_with_onnxruntime(model: nn.Module, onnx_file: str, inputs: Tensor) -> float:
    """Largest absolute difference between ONNX Runtime's and PyTorch's outputs.

    Args:
        model (nn.Module): The exported model, in eval mode.
        onnx_file (str): Its graph.
        inputs (Tensor): (B, 3, H, W) images.

    Returns:
        float: max |onnx - torch| over all outputs, relative to max(1, max |torch|).

    Raises:
        ExportError: If the outputs differ in number or shape.
    """
    import onnxruntime
    session = onnxruntime.InferenceSession(onnx_file, providers=['CPUExecutionProvider'])
    with torch.no_grad():
        expected = model(inputs)
    expected = expected if isinstance(expected, (tuple, list)) else (expected, )
    actual = session.run(None, {INPUT_NAME: inputs.numpy()})
    if len(actual) != len(expected) or any(a.shape != tuple(e.shape)
                                           for a, e in zip(actual, expected)):
        raise ExportError(f'ONNX Runtime returned shapes {[a.shape for a in actual]}, PyTorch '
                          f'{[tuple(e.shape) for e in expected]}')
    scale = max(1.0, max(float(e.abs().max()) for e in expected))
    return max(float(np.abs(a - e.numpy()).max()) for a, e in zip(actual, expected)) / scale


def probe_shape(shape: Tuple[int, int], divisor: int = 1) -> Tuple[int, int]:
    """A second input size for checking a dynamic graph: other residues, other aspect ratio.

    Returns:
        tuple[int, int]: (1.5 H + 1, 0.75 W + 1), rounded up to multiples of ``divisor``; the
        height always differs from H.
    """

    def round_up(size: int) -> int:
        return -(-size // divisor) * divisor

    return round_up(shape[0] * 3 // 2 + 1), round_up(shape[1] * 3 // 4 + 1)
