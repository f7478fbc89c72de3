"""VECA: Visual Elastic Core Attention (Song et al., "Elastic Attention Cores for Scalable
Vision Transformers", arXiv 2605.12491, 2026); official code github.com/alansong1322/VECA."""
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from mmlinear.registry import MODELS
from ..layers import (ROPE_POS_EXTRAPOLATIONS, PatchRope, ProjPatchEmbed, Rope2D, VECABlock,
                      active_prefix, build_coordinate_head, build_core_bank, check_core_budget,
                      move_cores)
from ..streaming.memory_model import BandWorkspace
from ..streaming.streamed_backbone import EmbedSetup
from ..utils import check_choice, valid_extents
from .base_plain_backbone import BasePlainBackbone
from .token_grid import BlockStep


@MODELS.register_module()
class VECA(BasePlainBackbone):
    """VECA backbone: N patch tokens exchange information only through K learned cores.

    Each block runs core-periphery attention on ``[cores; patches]``: the K cores attend to
    all K + N tokens, the patches to the cores only, so the cost is linear in N. Position
    enters only through a 2D axial RoPE: patches sit on their grid, cores at learned
    coordinates that a coordinate head moves from layer to layer. The bank holds 64 ordered
    cores (chunks of 8); any prefix of K in {8, 16, ..., 64} cores runs with the same weights
    (the elastic budget, ``active_cores``), and the cores beyond it take no part at all.
    Core 0 after the final norm is the global (CLS-like) token. No CLS token, registers or
    absolute positions, so any input size works. The patch coordinates span [-1, 1] on the
    training grid (``img_size``); a grid of another size stretches them over the image or
    lays the training frame on it (``pos_extrapolation``). Symbols: C is the width
    (``embed_dims``), K the number of active cores, N the number of patches.

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
        active_cores (int): Default core budget K, one of 8, 16, ..., 64. Settable later
            (``model.active_cores = 32``, as the elastic-budget hook does) and per call.
            Defaults to 64.
        img_size (int | tuple[int, int]): The training image size (H, W) in pixels, whose
            token grid (ceil(img_size / patch_size)) spans the coordinate frame [-1, 1]; used
            only by the 'tile' and 'extend' policies. Defaults to 224 (the released models).
        patch_size (int): Patch side. Defaults to 16.
        in_channels (int): Image channels. Defaults to 3.
        out_channels (int, optional): Width of an output projection ``Linear(C,
            out_channels)`` after the final norm (the reference ``output_proj``, used when
            distilling into a teacher of another width). None or C: no projection.
            Defaults to None.
        out_indices (int | Sequence[int]): Blocks whose outputs :meth:`forward` returns;
            negative values count from the end. Defaults to -1.
        out_type (str): 'featmap' ((B, C, H', W') patch tokens, for dense tasks) or
            'cls_token' ((B, C) core 0, for classification). Defaults to 'featmap'.
        dropout (float): Attention and MLP dropout (0 in every released model).
            Defaults to 0.
        rope_shift_coords (float, optional): Training-time random shift of the patch
            coordinates, see :class:`Rope2D`. Defaults to 0.08.
        rope_rescale_coords (float, optional): Training-time random rescale of the patch
            coordinates. Defaults to 2.0.
        pos_extrapolation (str): How the patch coordinates are laid on a token grid of
            another size than ``img_size``'s: 'interpolate' (normalised to each image, [-1, 1]
            per axis, as the reference), 'tile' (the training grid's coordinates repeated at
            its period) or 'extend' (the training grid's step, the training frame centred on
            the image); see :func:`~mmlinear.models.layers.patch_band_coords`. All three are
            the same at the training grid. A test-time choice: it changes no parameter, and it
            may be set on a built model (``backbone.pos_extrapolation``).
            Defaults to 'interpolate'.
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

    # yapf: disable
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
    # yapf: enable
    arch_keys = ('embed_dims', 'num_layers', 'num_heads', 'feedforward_channels')
    out_types = ('featmap', 'cls_token')
    max_cores = 64  # the bank size M of every released family
    core_chunk_size = 8  # the budget granularity

    def __init__(
        self,
        arch: Union[str, dict] = 'base',
        active_cores: int = 64,
        img_size: Union[int, Tuple[int, int]] = 224,
        patch_size: int = 16,
        in_channels: int = 3,
        out_channels: Optional[int] = None,
        out_indices: Union[int, Sequence[int]] = -1,
        out_type: str = 'featmap',
        dropout: float = 0.,
        rope_shift_coords: Optional[float] = 0.08,
        rope_rescale_coords: Optional[float] = 2.0,
        pos_extrapolation: str = 'interpolate',
        frozen_stages: int = -1,
        with_cp: bool = False,
        init_cfg: Optional[Union[dict, List[dict]]] = dict(
            type='TruncNormal', layer=['Linear', 'Conv2d'], std=.02, bias=0.)
    ) -> None:
        super().__init__(arch, patch_size, out_indices, out_type, frozen_stages, with_cp, init_cfg)
        self.out_channels = out_channels or self.embed_dims
        self.active_cores = active_cores
        self.img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        self.patch_resolution = tuple(-(-s // patch_size) for s in self.img_size)
        self.pos_extrapolation = pos_extrapolation

        self.patch_embed = ProjPatchEmbed(in_channels, self.embed_dims, patch_size)
        self.query_token_chunks, self.qcoord_chunks = build_core_bank(self.max_cores,
                                                                      self.core_chunk_size,
                                                                      self.embed_dims)
        self.rope = Rope2D(
            self.embed_dims // self.arch_settings['num_heads'],
            shift_coords=rope_shift_coords,
            rescale_coords=rope_rescale_coords)
        self.pos_linears, self.pos_alpha = build_coordinate_head(self.embed_dims, self.num_layers)
        self.blocks = nn.ModuleList(
            VECABlock(self.embed_dims, self.arch_settings['num_heads'],
                      self.arch_settings['feedforward_channels'], dropout)
            for _ in range(self.num_layers))
        self._add_final_norm(nn.LayerNorm(self.embed_dims))
        self.output_proj = (
            nn.Identity() if self.out_channels == self.embed_dims else nn.Linear(
                self.embed_dims, self.out_channels))
        self._freeze_stages()

    @property
    def active_cores(self) -> int:
        """The default core budget K, validated on assignment (8, 16, ..., 64)."""
        return self._active_cores

    @active_cores.setter
    def active_cores(self, value: int) -> None:
        self._active_cores = check_core_budget(value, self.max_cores, self.core_chunk_size)

    @property
    def pos_extrapolation(self) -> str:
        """How the patch coordinates are laid on another grid, one of
        :data:`~mmlinear.models.layers.ROPE_POS_EXTRAPOLATIONS`."""
        return self._pos_extrapolation

    @pos_extrapolation.setter
    def pos_extrapolation(self, value: str) -> None:
        check_choice('pos_extrapolation', value, ROPE_POS_EXTRAPOLATIONS)
        self._pos_extrapolation = value

    @property
    def num_extra_tokens(self) -> int:
        """E, the cores of the default budget (a call's ``active_cores`` overrides it)."""
        return self.active_cores

    def _stem_parts(self) -> List[nn.Module]:
        return [self.patch_embed, self.query_token_chunks, self.qcoord_chunks]

    def _head_parts(self) -> List[nn.Module]:
        return [self.final_norm, self.output_proj]

    def _frozen_parts(self) -> List[Union[nn.Module, nn.Parameter]]:
        parts = super()._frozen_parts()
        # pos_linears[i - 1] moves the cores before block i.
        parts += list(self.pos_linears[:max(self.frozen_stages - 1, 0)])
        if self.frozen_stages >= 2:
            parts.append(self.pos_alpha)
        return parts

    def _embed_setup(self,
                     batch: int,
                     hw_shape: Tuple[int, int],
                     token_padding_mask: Optional[Tensor],
                     device: torch.device,
                     whole_grid: bool,
                     active_cores: Optional[int] = None) -> EmbedSetup:
        """The cores of the call's budget, and the patches' RoPE angles (augmented in
        training), whose coordinates are laid on each image's own valid grid, not the padded
        one, by :attr:`pos_extrapolation`."""
        num_chunks = self._num_extra_tokens(active_cores) // self.core_chunk_size
        valid_hw = None
        if token_padding_mask is not None:
            valid_hw = valid_extents(token_padding_mask, hw_shape)
        block_state = dict(
            patch_rope=PatchRope(self.rope, hw_shape, valid_hw, batch, device,
                                 self.pos_extrapolation, self.patch_resolution),
            raw_core_coords=active_prefix(self.qcoord_chunks, num_chunks, batch))
        return EmbedSetup(
            active_prefix(self.query_token_chunks, num_chunks, batch), block_state, None)

    def _move_cores(self, index: int, cores: Tensor, state: Dict[str, Any]) -> Dict[str, Any]:
        """The state with the cores moved for block ``index`` (from block 1 on, by the
        previous block's core tokens (B, K, C)) and their RoPE coordinates ``core_coords``
        (B, K, 2)."""
        raw_core_coords = state['raw_core_coords']
        if index > 0:
            raw_core_coords = move_cores(raw_core_coords, cores, self.pos_linears[index - 1],
                                         self.pos_alpha[index - 1])
        return dict(state, raw_core_coords=raw_core_coords, core_coords=torch.tanh(raw_core_coords))

    def _block_inputs(self, index: int, extra: Optional[Tensor], hw_shape: Tuple[int, int],
                      state: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """Move the cores (``extra``, (B, K, C)), then their RoPE angles.

        Returns:
            tuple[dict, dict]: ``active_cores``, ``core_rope`` and ``patch_rope`` for the
            block, and the state with the cores' raw coordinates and the RoPE coordinates
            ``core_coords`` (B, K, 2) this block used.
        """
        state = self._move_cores(index, extra, state)
        return dict(
            active_cores=extra.shape[1],
            core_rope=self.rope(state['core_coords']),
            patch_rope=state['patch_rope']), state

    def _stream_workspace_per_token(self) -> BandWorkspace:
        # In autocast's dtype: the SwiGLU's fc1 output (2 F) and gate (F), q / k / v, the
        # rotated q / k (rounded back to q's dtype) and the attention output (6 C); in the
        # weights' dtype: the stream and its LayerNorm (2 C).
        return BandWorkspace(
            weight_dtype_values=2 * self.embed_dims,
            autocast_values=3 * self.arch_settings['feedforward_channels'] + 6 * self.embed_dims)

    def _stream_output_dims(self, index: int) -> int:
        return self.out_channels if index == self.num_layers - 1 else self.embed_dims

    def _apply_head(self, tokens: Tensor) -> Tensor:
        """Final norm then output projection of the last block's tokens (B, K + N, C)."""
        return self.output_proj(self.final_norm(tokens))

    def forward(self,
                x: Tensor,
                padding_mask: Optional[Tensor] = None,
                *,
                active_cores: Optional[int] = None) -> Tuple[Tensor, ...]:
        """Features for OpenMMLab heads and necks.

        The last block's output goes through the final norm and the output projection, as in
        :meth:`forward_tokens`. Earlier ``out_indices`` give the raw residual stream (no
        norm, no projection), as mmpretrain's ViT and the other mmlinear backbones: the final
        norm was fitted to the last block's statistics only, and the reference never
        normalises intermediate layers.

        Args:
            x (Tensor): (B, in_channels, H, W) floating-point images, any H, W >=
                patch_size.
            padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels, the valid
                region in the top-left corner (as mmdet / mmseg pad). Defaults to None: the
                mask attached to ``x`` by the mmlinear data preprocessors, if any.
            active_cores (int, optional): Core budget K for this call (8, 16, ..., 64).
                Defaults to None (:attr:`active_cores`).

        Returns:
            tuple[Tensor, ...]: One entry per ``out_indices``: (B, C', H', W') patch maps for
            'featmap' or (B, C') core 0 for 'cls_token', with H' = ceil(H / p),
            W' = ceil(W / p), C' = ``out_channels`` at the last block and C before it.
        """
        return self._forward_outputs(self._steps(x, padding_mask, active_cores))

    def forward_tokens(self,
                       x: Tensor,
                       padding_mask: Optional[Tensor] = None,
                       *,
                       active_cores: Optional[int] = None) -> Dict[str, object]:
        """The reference outputs, for distillation.

        Args: as :meth:`forward`.

        Returns:
            dict: 'global' (B, C') core 0 and 'patches' (B, N, C') patch tokens, both after
            the final norm and the output projection (C' = ``out_channels``); 'hw_shape'
            (H', W') with N = H' * W'.
        """
        *_, last = self._steps(x, padding_mask, active_cores)
        tokens = self._apply_head(last.tokens)
        active_cores = last.grid.num_extra_tokens
        return {
            'global': tokens[:, 0],
            'patches': tokens[:, active_cores:],
            'hw_shape': last.grid.hw_shape
        }

    def core_coordinates(self,
                         x: Tensor,
                         padding_mask: Optional[Tensor] = None,
                         *,
                         active_cores: Optional[int] = None) -> Tensor:
        """Where the cores sit in every block (for visualisation and analysis).

        Args: as :meth:`forward`.

        Returns:
            Tensor: (L, B, K, 2) the (x, y) RoPE coordinates, in (-1, 1), that each block
            used for the cores; block 0 uses ``tanh`` of the bank's raw coordinates.
        """
        return torch.stack(
            [step.state['core_coords'] for step in self._steps(x, padding_mask, active_cores)])

    def core_tokens(self,
                    x: Tensor,
                    padding_mask: Optional[Tensor] = None,
                    *,
                    active_cores: Optional[int] = None) -> Tensor:
        """The cores after every block (for analysis: how they move and spread).

        Args: as :meth:`forward`.

        Returns:
            Tensor: (L, B, K, C) the residual stream's core tokens after each block (no
            final norm).
        """
        return torch.stack([
            step.tokens[:, :step.grid.num_extra_tokens]
            for step in self._steps(x, padding_mask, active_cores)
        ])

    def forward_attention_maps(self,
                               x: Tensor,
                               padding_mask: Optional[Tensor] = None,
                               *,
                               active_cores: Optional[int] = None) -> List[Tensor]:
        """The cores' attention in every block, for visualisation and attention metrics.

        Only the cores attend to the patches (the patches attend to the cores), so the
        spatial maps are the core rows; core 0 is the global token (``query='first'`` of
        :func:`~mmlinear.visualization.attention_saliency`).

        Args: as :meth:`forward`.

        Returns:
            list[Tensor]: Per block, (B, num_heads, K, K + N) softmax rows of the K core
            queries over the cores then the patches (zero on padded patches).
        """
        steps = self._steps(x, padding_mask, active_cores, need_weights=True)
        return [step.weights for step in steps]

    def _steps(self,
               x: Tensor,
               padding_mask: Optional[Tensor],
               active_cores: Optional[int],
               need_weights: bool = False) -> Iterator[BlockStep]:
        """The block loop with the budget of this call (the default when None)."""
        return self._run_blocks(x, padding_mask, need_weights, active_cores=active_cores)

    def _num_extra_tokens(self, active_cores: Optional[int] = None) -> int:
        """The core budget of a call: ``active_cores``, checked, or the default."""
        if active_cores is None:
            return self.active_cores
        return check_core_budget(active_cores, self.max_cores, self.core_chunk_size)
