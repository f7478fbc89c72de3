"""WeightFormer: linear-time global visual modelling without explicit attention.

He, Han and Huang, arXiv 2605.01711 (2026); official code github.com/LeapLabTHU/WeightFormer.
"""
from typing import Dict, List, Optional, Sequence, Tuple, Union

from mmcv.cnn.bricks import DropPath
from mmengine.model import BaseModule
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from mmlinear.registry import MODELS
from ..layers import DynamicDWConv, DynamicLinear, ProjPatchEmbed, tokens_to_map
from ..utils import (check_choice, check_frozen_stages, freeze_modules, normalize_indices,
                     resolve_arch, resolve_padding_mask, token_padding_mask)

OUT_TYPES = ('featmap', 'avg_featmap')


class WeightFormerBlock(nn.Module):
    """A WeightFormer block, static or dynamic (the reference ``Block``).

    Static: ``x + DWConv3x3(x)`` (no norm, no drop path), then
    ``x + DropPath(linear2(GELU(linear1(LN2(x)))))``.
    Dynamic: ``x = LN1(x)`` replaces the stream (no skip around it, as the reference code;
    the paper figure omits this norm), then the same with :class:`DynamicDWConv` as the
    token mixer and :class:`DynamicLinear` as ``linear1``; ``linear2`` stays static.

    Args:
        embed_dims (int): Token width C.
        feedforward_channels (int): Hidden width of the MLP.
        dynamic (bool): Build the dynamic block.
        drop_path_rate (float): Stochastic depth of the MLP branch. Defaults to 0.
    """

    def __init__(self,
                 embed_dims: int,
                 feedforward_channels: int,
                 dynamic: bool,
                 drop_path_rate: float = 0.) -> None:
        super().__init__()
        self.dynamic = dynamic
        if dynamic:
            self.norm1 = nn.LayerNorm(embed_dims, eps=1e-6)
            self.dwc = DynamicDWConv(embed_dims)
            self.linear1 = DynamicLinear(embed_dims, feedforward_channels)
        else:
            self.dwc = nn.Conv2d(embed_dims, embed_dims, 3, padding=1, groups=embed_dims)
            self.linear1 = nn.Linear(embed_dims, feedforward_channels)
        self.norm2 = nn.LayerNorm(embed_dims, eps=1e-6)
        self.act = nn.GELU()
        self.linear2 = nn.Linear(feedforward_channels, embed_dims)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def forward(self,
                x: Tensor,
                hw_shape: Tuple[int, int],
                padding_mask: Optional[Tensor] = None) -> Tensor:
        """Args:
            x (Tensor): (B, N, C) row-major tokens.
            hw_shape (tuple[int, int]): The token grid (H, W), H * W = N.
            padding_mask (Tensor, optional): (B, N) bool, True on padded tokens.

        Returns:
            Tensor: (B, N, C).
        """
        if self.dynamic:
            x = self.norm1(x)
            x = x + self.dwc(x, hw_shape, padding_mask)
            hidden = self.linear1(self.norm2(x), hw_shape, padding_mask)
        else:
            mixer_in = x if padding_mask is None else x.masked_fill(padding_mask[..., None], 0)
            x = x + self.dwc(tokens_to_map(mixer_in, hw_shape)).flatten(2).transpose(1, 2)
            hidden = self.linear1(self.norm2(x))
        return x + self.drop_path(self.linear2(self.act(hidden)))


@MODELS.register_module()
class WeightFormer(BaseModule):
    """WeightFormer backbone: a plain stride-16 network whose global mixing is predicted
    weights instead of attention.

    A 16 x 16 patch embedding and a LayerNorm, then 17 blocks of one width: the blocks
    ``i % 3 == 1`` (1, 4, 7, 10, 13, 16) are dynamic (a depthwise conv with per-sample
    kernels and an MLP whose first layer has a per-sample weight, both predicted from the
    whole image in O(N)), the others static (3 x 3 depthwise conv and MLP). No class token
    and no position embedding, so nothing depends on the input size: any H, W >= 16 works
    (the patch embedding pads to a multiple of 16). The output at the last block is taken
    after the final norm; the reference classifier then averages the tokens
    ('avg_featmap'). Parameter names are those of the released checkpoints
    (``patch_embed.proj``, ``init_norm``, ``blocks.{i}.*``, ``norm``; the classifier
    ``head.*`` belongs to the task head), so they load without conversion.

    On token grids with an odd side the dynamic linear layers leave the last row / column
    out of their 2 x 2 pooling while still dividing by the full token count, exactly as the
    reference (whose released weights were trained on even 14 x 14 and 28 x 28 grids).

    Presets (the reference's): 't' (C = 192), 's' (C = 384) and 'b', which is the 's'
    architecture trained and tested at 448 x 448; all have 17 blocks and an MLP ratio of 4.
    The reference trains T with drop path 0 and S / B with 0.2.

    Args:
        arch (str | dict): A preset of ``arch_zoo`` or a dict with ``embed_dims``,
            ``num_layers`` and ``feedforward_channels``. Defaults to 't'.
        patch_size (int): Patch side. Defaults to 16.
        in_channels (int): Image channels. Defaults to 3.
        out_indices (int | Sequence[int]): Blocks whose outputs are returned; negative
            values count from the end. Defaults to -1.
        out_type (str): 'featmap' ((B, C, H', W') tokens, for dense tasks) or
            'avg_featmap' ((B, C) mean of the valid tokens, the reference's pooling).
            Defaults to 'avg_featmap'.
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
        **dict.fromkeys(['t', 'tiny'],
                        dict(embed_dims=192, num_layers=17, feedforward_channels=768)),
        **dict.fromkeys(['s', 'small'],
                        dict(embed_dims=384, num_layers=17, feedforward_channels=1536)),
        # B is the S architecture; only the resolution (448) of the released weights differs.
        **dict.fromkeys(['b', 'base'],
                        dict(embed_dims=384, num_layers=17, feedforward_channels=1536)),
    }

    def __init__(self,
                 arch: Union[str, dict] = 't',
                 patch_size: int = 16,
                 in_channels: int = 3,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'avg_featmap',
                 drop_path_rate: float = 0.,
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = dict(
                     type='TruncNormal', layer='Linear', std=.02, bias=0.)) -> None:
        super().__init__(init_cfg=init_cfg)
        self.arch_settings = resolve_arch(arch, self.arch_zoo, ('embed_dims', 'num_layers', 'feedforward_channels'))
        check_choice('out_type', out_type, OUT_TYPES)
        self.embed_dims = self.arch_settings['embed_dims']
        self.num_layers = self.arch_settings['num_layers']
        self.out_type = out_type
        self.patch_size = patch_size
        self.out_indices = normalize_indices('out_indices', out_indices, self.num_layers)
        self.frozen_stages = check_frozen_stages(frozen_stages, self.num_layers)
        self.with_cp = with_cp

        self.patch_embed = ProjPatchEmbed(in_channels, self.embed_dims, patch_size)
        self.init_norm = nn.LayerNorm(self.embed_dims, eps=1e-6)
        dpr = [drop_path_rate * i / max(self.num_layers - 1, 1) for i in range(self.num_layers)]
        self.blocks = nn.ModuleList(
            WeightFormerBlock(
                self.embed_dims,
                self.arch_settings['feedforward_channels'],
                dynamic=self.is_dynamic(i),
                drop_path_rate=dpr[i]) for i in range(self.num_layers))
        self.norm = nn.LayerNorm(self.embed_dims, eps=1e-6)
        self._freeze_stages()

    @staticmethod
    def is_dynamic(index: int) -> bool:
        """Whether block ``index`` is dynamic: every third block from the second
        (the reference tests ``(index + 2) % 3 == 0``)."""
        return index % 3 == 1

    def _freeze_stages(self) -> None:
        if self.frozen_stages < 0:
            return
        frozen: List[nn.Module] = [self.patch_embed, self.init_norm]
        frozen += list(self.blocks[:self.frozen_stages])
        if self.frozen_stages == self.num_layers:
            frozen.append(self.norm)
        freeze_modules(frozen)

    def train(self, mode: bool = True) -> 'WeightFormer':
        """Set the training mode, keeping frozen stages in eval mode."""
        super().train(mode)
        self._freeze_stages()
        return self

    def forward(self, x: Tensor, padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, ...]:
        """Args:
            x (Tensor): (B, in_channels, H, W) images, any H, W >= patch_size.
            padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels, with the
                valid region in the top-left corner (as mmdet / mmseg pad); by default the
                mask attached to ``x`` by the mmlinear data preprocessors, if any. Patches
                made only of padding then take no part in the dynamic layers' pooled statistics, enter
                the depthwise convolutions as zeros and are left out of 'avg_featmap'.
                Without it (the default) the reference behaviour is kept.

        Returns:
            tuple[Tensor, ...]: One entry per ``out_indices``: (B, C, ceil(H / p),
            ceil(W / p)) for 'featmap', (B, C) for 'avg_featmap'.
        """
        tokens, hw_shape = self.patch_embed(x)
        tokens = self.init_norm(tokens)
        padding_mask = resolve_padding_mask(x, padding_mask)
        token_mask = None
        if padding_mask is not None:
            token_mask = token_padding_mask(padding_mask, self.patch_size)

        outs = []
        for i, block in enumerate(self.blocks):
            if self.with_cp and tokens.requires_grad:
                tokens = checkpoint(block, tokens, hw_shape, token_mask, use_reentrant=False)
            else:
                tokens = block(tokens, hw_shape, token_mask)
            if i == self.num_layers - 1:
                tokens = self.norm(tokens)
            if i in self.out_indices:
                outs.append(self._format_output(tokens, hw_shape, token_mask))
        return tuple(outs)

    def _format_output(self, x: Tensor, hw_shape: Tuple[int, int],
                       token_mask: Optional[Tensor]) -> Tensor:
        if self.out_type == 'featmap':
            return tokens_to_map(x, hw_shape)
        if token_mask is None:
            return x.mean(dim=1)
        valid = (~token_mask).to(x.dtype)
        return (x * valid[..., None]).sum(1) / valid.sum(1, keepdim=True).clamp(min=1)
