"""WeightFormer: linear-time global visual modelling without explicit attention.

He, Han and Huang, arXiv 2605.01711 (2026); official code github.com/LeapLabTHU/WeightFormer.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from torch import Tensor, nn

from mmlinear.registry import MODELS
from ..layers import ProjPatchEmbed, WeightFormerBlock
from ..streaming.memory_model import BandWorkspace
from ..streaming.streamed_backbone import EmbedSetup
from ..utils import normalize_indices
from .base_plain_backbone import TRUNC_NORMAL_INIT, BasePlainBackbone

#: The points of the WeightFormer paper's ablation of how often a block is dynamic, named as
#: the configs/weightformer/weightformer-t_dynamic-*.py configs name them ('every-3' is the
#: released pattern).
DYNAMIC_FREQUENCIES = ('all', 'every-2', 'every-3', 'every-4', 'none')


def dynamic_block_indices(frequency: str, num_layers: int) -> List[int]:
    """The dynamic blocks of a ``num_layers``-block WeightFormer at one point of the ablation.

    Args:
        frequency (str): One of :data:`DYNAMIC_FREQUENCIES`: 'all', 'none', or 'every-k',
            every k-th block from the second, as the released pattern ('every-3': 1, 4, 7,
            ...) and the paper-scale configs count them.
        num_layers (int): Blocks of the body.

    Returns:
        list[int]: The indices of the dynamic blocks, ascending (``dynamic_indices``).

    Raises:
        ValueError: An unknown ``frequency``, naming the allowed ones.
    """
    if frequency not in DYNAMIC_FREQUENCIES:
        raise ValueError(f'unknown dynamic-block frequency {frequency!r}; allowed: '
                         f'{", ".join(DYNAMIC_FREQUENCIES)}')
    if frequency == 'all':
        return list(range(num_layers))
    if frequency == 'none':
        return []
    # Every k-th block from the second (the reference tests (i + 2) % 3 == 0 for k = 3).
    return list(range(1, num_layers, int(frequency[len('every-'):])))


@MODELS.register_module()
class WeightFormer(BasePlainBackbone):
    """WeightFormer backbone: a plain stride-16 network whose global mixing is predicted
    weights instead of attention.

    A 16 x 16 patch embedding and a LayerNorm, then 17 blocks of one width: the blocks
    ``i % 3 == 1`` (1, 4, 7, 10, 13, 16; ``dynamic_indices`` chooses others) are dynamic (a
    depthwise conv with per-sample kernels and an MLP whose first layer has a per-sample
    weight, both predicted from the whole image in O(N)), the others static (3 x 3 depthwise
    conv and MLP). No class token and no position embedding, so nothing depends on the input
    size: any H, W >= 16 works (the patch embedding pads to a multiple of 16). The output at
    the last block is taken after the final norm; the reference classifier then averages the
    tokens ('avg_featmap'). Parameter names are those of the released checkpoints
    (``patch_embed.proj``, ``init_norm``, ``blocks.{i}.*``, ``norm``; the classifier
    ``head.*`` belongs to the task head), so they load without conversion.

    With a ``padding_mask`` (see :meth:`BasePlainBackbone.forward`), patches made only of
    padding take no part in the dynamic layers' pooled statistics, enter the depthwise
    convolutions as zeros and are left out of 'avg_featmap'. Without it (the default) the
    reference behaviour is kept.

    On token grids with an odd side the dynamic linear layers leave the last row / column
    out of their 2 x 2 pooling while still dividing by the full token count, exactly as the
    reference (whose released weights were trained on even 14 x 14 and 28 x 28 grids).

    Presets (the reference's): 't' (C = 192), 's' (C = 384) and 'b', which is the 's'
    architecture trained and tested at 448 x 448; all have 17 blocks and an MLP ratio of 4.
    'test' (C = 32, 2 blocks) is a small CPU preset, not a released model.
    The reference trains T with drop path 0 and S / B with 0.2.

    Args:
        arch (str | dict): A preset of ``arch_zoo`` ('t', 's', 'b', 'test') or a dict with
            ``embed_dims``, ``num_layers`` and ``feedforward_channels``. Defaults to 't'.
        patch_size (int): Patch side. Defaults to 16.
        in_channels (int): Image channels. Defaults to 3.
        out_indices (int | Sequence[int]): Blocks whose outputs are returned; negative
            values count from the end. Defaults to -1.
        out_type (str): 'featmap' ((B, C, H', W') tokens, for dense tasks) or
            'avg_featmap' ((B, C) mean of the valid tokens, the reference's pooling).
            Defaults to 'avg_featmap'.
        dynamic_indices (Sequence[int], optional): The blocks that are dynamic (negative
            values count from the end; empty for none), for the paper's ablation of how
            often a dynamic block comes (``configs/weightformer/*_dynamic-every-*``).
            Defaults to None: the released pattern, every third block from the second
            (:func:`dynamic_block_indices` gives the ablation's other points).
        drop_path_rate (float): Stochastic depth of the MLP branches, rising linearly from 0
            at the first block to this value at the last. Defaults to 0.
        frozen_stages (int): Freeze the patch embedding and ``init_norm`` (stage 0) and then
            the first ``frozen_stages`` blocks (all of them also freezes the final norm); -1
            freezes nothing. Defaults to -1.
        with_cp (bool): Gradient checkpointing of each block (saves memory). Defaults to
            False.
        init_cfg (dict | list[dict], optional): Initialisation config. Defaults to the
            reference's: truncated normal (std 0.02) Linear layers with zero bias; the
            convolutions keep the PyTorch default and the dynamic layers' own tensors are
            truncated normal (std 0.02) from their constructors.
    """

    arch_zoo: Dict[str, Dict[str, int]] = {
        **dict.fromkeys(['t', 'tiny'], dict(
                            embed_dims=192, num_layers=17, feedforward_channels=768)),
        **dict.fromkeys(['s', 'small'],
                        dict(embed_dims=384, num_layers=17, feedforward_channels=1536)),
        # B is the S architecture; only the resolution (448) of the released weights differs.
        **dict.fromkeys(['b', 'base'], dict(
                            embed_dims=384, num_layers=17, feedforward_channels=1536)),
        # Not a released model: small enough for CPU tests and demos.
        'test':
        dict(embed_dims=32, num_layers=2, feedforward_channels=64),
    }
    arch_keys = ('embed_dims', 'num_layers', 'feedforward_channels')
    out_types = ('featmap', 'avg_featmap')
    final_norm_name = 'norm'  # the released checkpoints' key

    def __init__(self,
                 arch: Union[str, dict] = 't',
                 patch_size: int = 16,
                 in_channels: int = 3,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'avg_featmap',
                 dynamic_indices: Optional[Sequence[int]] = None,
                 drop_path_rate: float = 0.,
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = TRUNC_NORMAL_INIT) -> None:
        super().__init__(arch, patch_size, out_indices, out_type, frozen_stages, with_cp, init_cfg)
        self.patch_embed = ProjPatchEmbed(in_channels, self.embed_dims, patch_size)
        self.init_norm = nn.LayerNorm(self.embed_dims, eps=1e-6)
        if dynamic_indices is None:
            dynamic_indices = dynamic_block_indices('every-3', self.num_layers)
        self.dynamic_indices = normalize_indices('dynamic_indices', dynamic_indices,
                                                 self.num_layers)
        dpr = [drop_path_rate * i / max(self.num_layers - 1, 1) for i in range(self.num_layers)]
        self.blocks = nn.ModuleList(
            WeightFormerBlock(
                self.embed_dims,
                self.arch_settings['feedforward_channels'],
                dynamic=i in self.dynamic_indices,
                drop_path_rate=dpr[i]) for i in range(self.num_layers))
        self._add_final_norm(nn.LayerNorm(self.embed_dims, eps=1e-6))
        self._freeze_stages()

    def _stem_parts(self) -> List[nn.Module]:
        return [self.patch_embed, self.init_norm]

    def _embed_rows(self, tokens: Tensor, rows: Tuple[int, int], setup: EmbedSetup) -> Tensor:
        return self.init_norm(tokens)

    #: The dynamic linear layers pool 2 x 2 blocks of tokens: bands start on even rows.
    stream_row_alignment = 2

    def _stream_workspace_per_token(self) -> BandWorkspace:
        # In autocast's dtype: the dynamic linear layer's product and its bias sum, the GELU
        # (3 F) and the convolution's output (C); in the weights' dtype: the stream, the
        # LayerNorm and the convolution's stacked input (3 C).
        return BandWorkspace(
            weight_dtype_values=3 * self.embed_dims,
            autocast_values=3 * self.arch_settings['feedforward_channels'] + self.embed_dims)

    def _block_inputs(self, index: int, extra: Optional[Tensor], hw_shape: Tuple[int, int],
                      state: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        return dict(hw_shape=hw_shape), state
