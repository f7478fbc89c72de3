"""VECA: Visual Elastic Core Attention (Song et al., "Elastic Attention Cores for Scalable
Vision Transformers", arXiv 2605.12491, 2026); official code github.com/alansong1322/VECA."""
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from mmengine.model import BaseModule
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from mmlinear.registry import MODELS
from ..layers import (ProjPatchEmbed, Rope2D, VECABlock, active_prefix, build_coordinate_head,
                      build_core_bank, check_core_budget, move_cores, patch_grid_coords,
                      tokens_to_map)
from ..utils import (check_choice, check_frozen_stages, freeze_modules, normalize_indices,
                     resolve_arch, resolve_padding_mask, token_padding_mask)

OUT_TYPES = ('featmap', 'cls_token')


class BlockStep(NamedTuple):
    """What :meth:`VECA._run_blocks` yields after each block."""
    index: int
    tokens: Tensor  # (B, C + N, D) after the block
    core_coords: Tensor  # (B, C, 2) the core coordinates the block used
    hw_shape: Tuple[int, int]
    weights: Optional[Tensor]  # (B, heads, C, C + N) core attention rows, if asked for


@MODELS.register_module()
class VECA(BaseModule):
    """VECA backbone: N patch tokens exchange information only through C learned cores.

    Each block runs core-periphery attention on ``[cores; patches]``: the C cores attend to
    all C + N tokens, the patches to the cores only, so the cost is linear in N. Position
    enters only through a 2D axial RoPE: patches sit on their grid, cores at learned
    coordinates that a coordinate head moves from layer to layer. The bank holds 64 ordered
    cores (chunks of 8); any prefix of C in {8, 16, ..., 64} cores runs with the same weights
    (the elastic budget), and the cores beyond it take no part at all. Core 0 after the final
    norm is the global (CLS-like) token. No CLS token, registers or absolute positions, so
    any input size works.

    Differences from the reference, all deliberate:

    - Sides that are not multiples of 16 are zero-padded at the bottom / right to whole
      patches (as :class:`PatchEmbed`, so the last partial row / column is seen); the
      reference convolution drops them. Multiples of 16 give the reference outputs exactly.
    - ``padding_mask`` (mmdet / mmseg padded batches): the cores ignore padded patches, and
      the patch coordinates are those of each image's valid grid, so an image's features do
      not depend on how far the batch is padded. Without a mask: the reference.
    - ``out_indices`` / ``out_type`` for OpenMMLab heads (the reference returns only the last
      layer).

    The state dict has the released keys (``patch_embed.proj``, ``query_token_chunks``,
    ``qcoord_chunks``, ``pos_linears``, ``pos_alpha``, ``blocks.{i}.*``, ``final_norm``,
    optional ``output_proj``); ``tools/model_converters/veca2mmlinear.py`` converts a
    released file.

    Args:
        arch (str | dict): 'small', 'splus', 'base', 'large' (or 's', 'b', 'l'), 'test' (a
            tiny CPU preset), or a dict with ``embed_dims``, ``num_layers``, ``num_heads`` and
            ``feedforward_channels`` (the SwiGLU hidden width). Defaults to 'base'.
        active_cores (int): Default core budget C, one of 8, 16, ..., 64. Settable later
            (``model.active_cores = 32``, as the elastic-budget hook does) and per call.
            Defaults to 64.
        patch_size (int): Patch side. Defaults to 16.
        in_channels (int): Image channels. Defaults to 3.
        out_channels (int, optional): Width of an output projection ``Linear(D,
            out_channels)`` after the final norm (the reference ``output_proj``, used when
            distilling into a teacher of another width). None or D: no projection.
            Defaults to None.
        out_indices (int | Sequence[int]): Blocks whose outputs :meth:`forward` returns;
            negative values count from the end. Defaults to -1.
        out_type (str): 'featmap' ((B, D, Hp, Wp) patch tokens, for dense tasks) or
            'cls_token' ((B, D) core 0, for classification). Defaults to 'featmap'.
        dropout (float): Attention and MLP dropout (0 in every released model).
            Defaults to 0.
        rope_shift_coords (float, optional): Training-time random shift of the patch
            coordinates, see :class:`Rope2D`. Defaults to 0.08.
        rope_rescale_coords (float, optional): Training-time random rescale of the patch
            coordinates. Defaults to 2.0.
        frozen_stages (int): Freeze the patch embedding and the core bank (stage 0), then
            the first ``frozen_stages`` blocks with the coordinate heads feeding them; -1
            freezes nothing. ``pos_alpha`` is one vector, so it freezes as soon as one of its
            gains feeds a frozen block (``frozen_stages >= 2``); freezing every block also
            freezes the final norm and output projection. Defaults to -1.
        with_cp (bool): Gradient checkpointing of each block. Defaults to False.
        init_cfg (dict | list[dict], optional): Defaults to the reference init: truncated
            normal (std 0.02) Linear and patch convolution with zero bias, LayerNorms 1 / 0.
            The cores (N(0, 1 / D) embeddings, farthest-point-sampled coordinates) and
            ``pos_alpha`` (0.01) are set in the constructor and left alone by it.
    """

    arch_zoo: Dict[str, Dict[str, int]] = {
        **dict.fromkeys(['s', 'small'], dict(embed_dims=384, num_layers=12, num_heads=6,
                                             feedforward_channels=1024)),
        'splus': dict(embed_dims=384, num_layers=12, num_heads=6, feedforward_channels=1536),
        **dict.fromkeys(['b', 'base'], dict(embed_dims=768, num_layers=12, num_heads=12,
                                            feedforward_channels=2048)),
        **dict.fromkeys(['l', 'large'], dict(embed_dims=1024, num_layers=24, num_heads=16,
                                             feedforward_channels=2730)),
        # Not a released model: small enough for CPU tests and demos.
        'test': dict(embed_dims=64, num_layers=2, num_heads=2, feedforward_channels=128),
    }
    max_cores = 64  # the bank size M of every released family
    core_chunk_size = 8  # the budget granularity

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 active_cores: int = 64,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 out_channels: Optional[int] = None,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'featmap',
                 dropout: float = 0.,
                 rope_shift_coords: Optional[float] = 0.08,
                 rope_rescale_coords: Optional[float] = 2.0,
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = dict(
                     type='TruncNormal', layer=['Linear', 'Conv2d'], std=.02, bias=0.)
                 ) -> None:
        super().__init__(init_cfg=init_cfg)
        self.arch_settings = resolve_arch(
            arch, self.arch_zoo, ('embed_dims', 'num_layers', 'num_heads', 'feedforward_channels'))
        check_choice('out_type', out_type, OUT_TYPES)
        self.embed_dims = self.arch_settings['embed_dims']
        self.num_layers = self.arch_settings['num_layers']
        self.out_channels = out_channels or self.embed_dims
        self.out_type = out_type
        self.patch_size = patch_size
        self.out_indices = normalize_indices('out_indices', out_indices, self.num_layers)
        self.frozen_stages = check_frozen_stages(frozen_stages, self.num_layers)
        self.with_cp = with_cp
        self.active_cores = active_cores

        self.patch_embed = ProjPatchEmbed(in_channels, self.embed_dims, patch_size)
        self.query_token_chunks, self.qcoord_chunks = build_core_bank(
            self.max_cores, self.core_chunk_size, self.embed_dims)
        self.rope = Rope2D(
            self.embed_dims // self.arch_settings['num_heads'],
            shift_coords=rope_shift_coords,
            rescale_coords=rope_rescale_coords)
        self.pos_linears, self.pos_alpha = build_coordinate_head(self.embed_dims,
                                                                 self.num_layers)
        self.blocks = nn.ModuleList(
            VECABlock(self.embed_dims, self.arch_settings['num_heads'],
                      self.arch_settings['feedforward_channels'], dropout)
            for _ in range(self.num_layers))
        self.final_norm = nn.LayerNorm(self.embed_dims)
        self.output_proj = (nn.Identity() if self.out_channels == self.embed_dims else
                            nn.Linear(self.embed_dims, self.out_channels))
        self._freeze_stages()

    @property
    def active_cores(self) -> int:
        """The default core budget C, validated on assignment (8, 16, ..., 64)."""
        return self._active_cores

    @active_cores.setter
    def active_cores(self, value: int) -> None:
        self._active_cores = check_core_budget(value, self.max_cores, self.core_chunk_size)

    def _freeze_stages(self) -> None:
        if self.frozen_stages < 0:
            return
        frozen: List[nn.Module] = [self.patch_embed, self.query_token_chunks,
                                   self.qcoord_chunks]
        frozen += list(self.blocks[:self.frozen_stages])
        # pos_linears[i - 1] moves the cores before block i.
        frozen += list(self.pos_linears[:max(self.frozen_stages - 1, 0)])
        if self.frozen_stages >= 2:
            self.pos_alpha.requires_grad = False
        if self.frozen_stages == self.num_layers:
            frozen += [self.final_norm, self.output_proj]
        freeze_modules(frozen)

    def train(self, mode: bool = True) -> 'VECA':
        """Set the training mode, keeping frozen stages in eval mode."""
        super().train(mode)
        self._freeze_stages()
        return self

    def _embed(self, x: Tensor, padding_mask: Optional[Tensor]
               ) -> Tuple[Tensor, Tensor, Tuple[int, int], Optional[Tensor]]:
        """Patch tokens, their RoPE coordinates (augmented in training), the grid shape and
        the (B, N) token padding mask."""
        B = x.shape[0]
        padding_mask = resolve_padding_mask(x, padding_mask)
        patches, hw_shape = self.patch_embed(x)
        token_mask = valid_hw = None
        if padding_mask is not None:
            token_mask = token_padding_mask(padding_mask, self.patch_size)
            valid = ~token_mask.view(B, *hw_shape)
            # The valid region is the top-left corner (mmdet / mmseg padding); an all-padding
            # image keeps a 1 x 1 grid so its coordinates stay finite.
            valid_hw = torch.stack([valid.any(2).sum(1), valid.any(1).sum(1)], 1).clamp(min=1)
        coords = patch_grid_coords(hw_shape, valid_hw, patches.device).expand(B, -1, -1)
        return patches, self.rope.augment_patch_coords(coords), hw_shape, token_mask

    def _run_blocks(self, x: Tensor, num_cores: int, padding_mask: Optional[Tensor],
                    need_weights: bool = False) -> Iterator[BlockStep]:
        """Run the blocks on ``[cores; patches]``, yielding a :class:`BlockStep` after each
        (with the core attention weights when ``need_weights``)."""
        B = x.shape[0]
        patches, patch_coords, hw_shape, token_mask = self._embed(x, padding_mask)
        num_chunks = num_cores // self.core_chunk_size
        cores = active_prefix(self.query_token_chunks, num_chunks, B)
        raw_coords = active_prefix(self.qcoord_chunks, num_chunks, B)
        x = torch.cat([cores, patches], dim=1)
        for i, block in enumerate(self.blocks):
            if i > 0:
                raw_coords = move_cores(raw_coords, x[:, :num_cores], self.pos_linears[i - 1],
                                        self.pos_alpha[i - 1])
            core_coords = torch.tanh(raw_coords)
            cos, sin = self.rope(torch.cat([core_coords, patch_coords], dim=1))
            weights = None
            if need_weights:
                x, weights = block(x, num_cores, cos, sin, token_mask, need_weights=True)
            elif self.with_cp and x.requires_grad:
                x = checkpoint(block, x, num_cores, cos, sin, token_mask, use_reentrant=False)
            else:
                x = block(x, num_cores, cos, sin, token_mask)
            yield BlockStep(i, x, core_coords, hw_shape, weights)

    def _head(self, x: Tensor) -> Tensor:
        """Final norm then output projection of the last block's tokens (B, T, D)."""
        return self.output_proj(self.final_norm(x))

    def forward(self,
                x: Tensor,
                active_cores: Optional[int] = None,
                padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, ...]:
        """Features for OpenMMLab heads and necks.

        The last block's output goes through the final norm and the output projection, as in
        :meth:`forward_tokens`. Earlier ``out_indices`` give the raw residual stream (no
        norm, no projection), as mmpretrain's ViT and the other mmlinear backbones: the final
        norm was fitted to the last block's statistics only, and the reference never
        normalises intermediate layers (the spec leaves this open).

        Args:
            x (Tensor): (B, in_channels, H, W) images, any H, W >= patch_size.
            active_cores (int, optional): Core budget C for this call (8, 16, ..., 64).
                Defaults to None (:attr:`active_cores`).
            padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels, the valid
                region in the top-left corner (as mmdet / mmseg pad). Defaults to None: the
                mask attached to ``x`` by the mmlinear data preprocessors, if any.

        Returns:
            tuple[Tensor, ...]: One entry per ``out_indices``: (B, D', Hp, Wp) patch maps for
            'featmap' or (B, D') core 0 for 'cls_token', with Hp = ceil(H / p),
            Wp = ceil(W / p), D' = ``out_channels`` at the last block and D before it.
        """
        num_cores = self._budget(active_cores)
        outs = []
        for i, tokens, _, hw_shape, _ in self._run_blocks(x, num_cores, padding_mask):
            if i not in self.out_indices:
                continue
            if i == self.num_layers - 1:
                tokens = self._head(tokens)
            if self.out_type == 'cls_token':
                outs.append(tokens[:, 0])
            else:
                outs.append(tokens_to_map(tokens[:, num_cores:], hw_shape))
        return tuple(outs)

    def forward_tokens(self,
                       x: Tensor,
                       active_cores: Optional[int] = None,
                       padding_mask: Optional[Tensor] = None) -> Dict[str, object]:
        """The reference outputs, for distillation.

        Args: as :meth:`forward`.

        Returns:
            dict: 'global' (B, D') core 0 and 'patches' (B, N, D') patch tokens, both after the
            final norm and the output projection (D' = ``out_channels``); 'hw_shape'
            (Hp, Wp) with N = Hp * Wp.
        """
        num_cores = self._budget(active_cores)
        *_, (_, tokens, _, hw_shape, _) = self._run_blocks(x, num_cores, padding_mask)
        tokens = self._head(tokens)
        return {'global': tokens[:, 0], 'patches': tokens[:, num_cores:], 'hw_shape': hw_shape}

    def core_coordinates(self,
                         x: Tensor,
                         active_cores: Optional[int] = None,
                         padding_mask: Optional[Tensor] = None) -> Tensor:
        """Where the cores sit in every block (for visualisation and analysis).

        Args: as :meth:`forward`.

        Returns:
            Tensor: (L, B, C, 2) the (x, y) RoPE coordinates, in (-1, 1), that each block
            used for the cores; block 0 uses ``tanh`` of the bank's raw coordinates.
        """
        num_cores = self._budget(active_cores)
        return torch.stack(
            [step.core_coords for step in self._run_blocks(x, num_cores, padding_mask)])

    def forward_attention_maps(self,
                               x: Tensor,
                               active_cores: Optional[int] = None,
                               padding_mask: Optional[Tensor] = None) -> List[Tensor]:
        """The cores' attention in every block, for visualisation and attention metrics.

        Only the cores attend to the patches (the patches attend to the cores), so the
        spatial maps are the core rows; core 0 is the global token (``query='first'`` of
        :func:`~mmlinear.utils.attention_saliency.attention_saliency`).

        Args: as :meth:`forward`.

        Returns:
            list[Tensor]: Per block, (B, num_heads, C, C + N) softmax rows of the C core
            queries over the cores then the patches (zero on padded patches).
        """
        num_cores = self._budget(active_cores)
        return [
            step.weights
            for step in self._run_blocks(x, num_cores, padding_mask, need_weights=True)
        ]

    def _budget(self, active_cores: Optional[int]) -> int:
        if active_cores is None:
            return self.active_cores
        return check_core_budget(active_cores, self.max_cores, self.core_chunk_size)
