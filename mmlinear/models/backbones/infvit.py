"""InfViT: a plain ViT whose attention is Infinite Self-Attention (Roffo and Palmer, 2026)."""
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.model.weight_init import trunc_normal_
from torch import Tensor, nn

from mmlinear.registry import MODELS
from ..layers import ATTN_TYPES, RHO_MODES, InfViTBlock, PatchEmbed
from ..layers.infvit_block import check_streamable
from ..layers.windowed_linear_infsa import TOKEN_WINDOW_UNIT
from ..streaming.memory_model import BandWorkspace
from ..streaming.streamed_backbone import EmbedSetup
from ..utils import check_choice, pos_embed_for_valid_regions, resize_pos_embed, valid_extents
from ..utils.pos_embed import POS_EXTRAPOLATIONS, BandPosEmbed, TablePosEmbed, pos_embed_on_grid
from ..utils.windowed_pyramid_pooling import ContextWindow, check_context_window
from .base_plain_backbone import TRUNC_NORMAL_INIT, BasePlainBackbone

# Keys of checkpoints saved before the blocks and the final norm got the names that all
# mmlinear backbones share.
LEGACY_KEYS = ((re.compile(r'^layers\.'), 'blocks.'), (re.compile(r'^ln1\.'), 'final_norm.'))


@MODELS.register_module()
class InfViT(BasePlainBackbone):
    """InfViT backbone: CLS token, learned absolute positions, pre-norm blocks.

    Every block mixes tokens with ``attn_type``: Pure InfSA (a Frobenius-normalised ReLU
    attention, one Katz/Neumann hop per layer), Linear-InfSA (an O(N) approximation of the
    attention graph's Perron vector, broadcast to all tokens) or the softmax baseline in the
    same body. The output at the last layer is taken after the final norm (mmpretrain's
    ``final_norm=True`` convention). Any input size works: the patch embedding pads to a
    multiple of the patch size, and the position table is interpolated (bicubic, float32) or
    tiled at its period (``pos_extrapolation``).
    The skeleton (presets, outputs, freezing, block loop, padding masks) is
    :class:`BasePlainBackbone`'s. Checkpoints saved with the earlier key names
    (``layers.{i}``, ``ln1``) load unchanged.

    Args:
        arch (str | dict): A preset of ``arch_zoo`` ('infvit-4l', 'infvit-24l', the small
            'infvit-demo' and 'test') or a dict with ``embed_dims``, ``num_layers``,
            ``num_heads`` and ``feedforward_channels``. Defaults to 'infvit-4l'.
        attn_type (str): 'linear', 'pure', 'softmax', 'none' (no token mixing, an
            ablation control) or an efficient-attention baseline of the InfSA paper's
            comparison: 'elu_linear', 'performer', 'linformer', 'nystromformer' or
            'agent'. Defaults to 'linear'.
        img_size (int | tuple[int, int]): Size the position table is made for.
            Defaults to 224.
        patch_size (int): Patch side. Defaults to 16.
        in_channels (int): Image channels. Defaults to 3.
        out_indices (int | Sequence[int]): Layers whose outputs are returned; negative
            values count from the end. Defaults to -1.
        out_type (str): 'featmap' ((B, C, H', W') patch tokens, for dense tasks),
            'cls_token' ((B, C)), 'avg_featmap' ((B, C) mean of the valid patch tokens) or
            'raw' ((B, 1 + N, C)). Defaults to 'cls_token'.
        rho_init (float): Initial InfSA decay. Defaults to 0.95.
        rho_mode (str): 'per_head', 'per_layer' or 'fixed'. Defaults to 'per_head'.
        tie_qk (bool): Share the query and key projections. Defaults to False.
        qkv_bias (bool): Bias in the q/k/v projections. Defaults to True.
        drop_rate (float): Dropout after the embeddings and projections. Defaults to 0.
        attn_drop_rate (float): Dropout on attention scores. Defaults to 0.
        drop_path_rate (float): Stochastic depth, linearly increasing over the layers.
            Defaults to 0.
        final_norm (bool): LayerNorm after the last layer. Defaults to True.
        layer_norm_eps (float): Epsilon of every LayerNorm. Defaults to 1e-6 (timm's and
            mmpretrain's ViTs; Hugging Face's ViT uses 1e-12, which weights converted from it
            need to reproduce its features).
        interpolate_mode (str): Position-table interpolation. Defaults to 'bicubic'.
        pos_extrapolation (str): How the position table is laid on a token grid of another
            size than ``img_size``'s: 'interpolate' (stretched with ``interpolate_mode``) or
            'tile' (repeated at the table's period, cropped to the grid; see
            :mod:`mmlinear.models.utils.pos_embed`). A test-time choice: it changes no
            parameter, and it may be set on a built model (``backbone.pos_extrapolation``).
            Checkpoints whose table was made for another size are still interpolated to
            ``img_size``'s on load. Defaults to 'interpolate'.
        context_window (None | str | int | tuple[int, int]): 'linear' attention only: the
            window of patch tokens whose Linear-InfSA summary each patch token takes, in
            tokens of the patch grid (rows, columns; an int for a square), placed around the
            token as ``ContextWindowUPerHead`` places its windows (centred, shifted inside
            the image at its borders). The CLS token is in every window (as in every
            training crop) and keeps the whole image's summary. None or 'whole': the whole
            image's summary for every token, as without the option, bit for bit; so is a
            window at least the grid, e.g. 16 on the demo's 128-pixel training crops (16 x
            16 tokens), where training is unchanged. A test-time choice for images larger
            than the training crop: it changes no parameter and may be set on a built model
            (``backbone.context_window``). Exact per token, O(N w_h w_w H d) (see
            docs/large_images.md, "Context window of Linear-InfSA"); streams; no attention
            maps or attention dropout where it is smaller than the grid. Defaults to None.
        frozen_stages (int): Freeze the patch embedding, the CLS token and the position table
            (stage 0) and then the first ``frozen_stages`` layers; -1 freezes nothing.
            Defaults to -1.
        with_cp (bool): Gradient checkpointing of each block (saves memory). Defaults to False.
        mixer_cfg (dict, optional): Options of an efficient-attention baseline (see
            :class:`InfSAAttention`); Linformer's ``max_tokens`` defaults to the tokens of
            ``img_size`` (the CLS token and its patches), the longest input it then takes.
            Defaults to None.
        init_cfg (dict | list[dict], optional): Initialisation config. Defaults to truncated
            normal (std 0.02) Linear layers, as DeiT.
    """

    arch_zoo: Dict[str, Dict[str, int]] = {
        'infvit-4l':
        dict(embed_dims=1024, num_layers=4, num_heads=16, feedforward_channels=4096),
        'infvit-24l':
        dict(embed_dims=1024, num_layers=24, num_heads=16, feedforward_channels=4096),
        # Small presets for CPU demos and tests.
        'infvit-demo':
        dict(embed_dims=96, num_layers=4, num_heads=4, feedforward_channels=384),
        **dict.fromkeys(['test', 'infvit-test'],
                        dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)),
    }
    arch_keys = ('embed_dims', 'num_layers', 'num_heads', 'feedforward_channels')
    num_extra_tokens = 1  # the CLS token

    def __init__(self,
                 arch: Union[str, dict] = 'infvit-4l',
                 attn_type: str = 'linear',
                 img_size: Union[int, Tuple[int, int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'cls_token',
                 rho_init: float = 0.95,
                 rho_mode: str = 'per_head',
                 tie_qk: bool = False,
                 qkv_bias: bool = True,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 final_norm: bool = True,
                 layer_norm_eps: float = 1e-6,
                 interpolate_mode: str = 'bicubic',
                 pos_extrapolation: str = 'interpolate',
                 context_window: ContextWindow = None,
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 mixer_cfg: Optional[Dict[str, Any]] = None,
                 init_cfg: Optional[Union[dict, List[dict]]] = TRUNC_NORMAL_INIT) -> None:
        super().__init__(arch, patch_size, out_indices, out_type, frozen_stages, with_cp, init_cfg)
        check_choice('attn_type', attn_type, ATTN_TYPES)
        check_choice('rho_mode', rho_mode, RHO_MODES)
        self.attn_type = attn_type
        self.img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        self.interpolate_mode = interpolate_mode
        self.pos_extrapolation = pos_extrapolation
        self.context_window = context_window

        self.patch_embed = PatchEmbed(in_channels, self.embed_dims, patch_size)
        self.patch_resolution = tuple(-(-s // patch_size) for s in self.img_size)
        num_patches = self.patch_resolution[0] * self.patch_resolution[1]
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        self.pos_embed = nn.Parameter(
            torch.zeros(1, self.num_extra_tokens + num_patches, self.embed_dims))
        self.drop_after_pos = nn.Dropout(drop_rate)

        mixer_cfg = dict(mixer_cfg or {})
        if attn_type == 'linformer':
            mixer_cfg.setdefault('max_tokens', self.num_extra_tokens + num_patches)
        # On the CPU, so that the model can also be built on the meta device (shapes only).
        dpr = torch.linspace(0, drop_path_rate, self.num_layers, device='cpu').tolist()
        self.blocks = nn.ModuleList(
            InfViTBlock(
                self.embed_dims,
                self.arch_settings['num_heads'],
                self.arch_settings['feedforward_channels'],
                drop_rate=drop_rate,
                attn_drop_rate=attn_drop_rate,
                drop_path_rate=dpr[i],
                layer_norm_eps=layer_norm_eps,
                attn_type=attn_type,
                rho_init=rho_init,
                rho_mode=rho_mode,
                qkv_bias=qkv_bias,
                tie_qk=tie_qk,
                mixer_cfg=mixer_cfg) for i in range(self.num_layers))
        self._add_final_norm(
            nn.LayerNorm(self.embed_dims, eps=layer_norm_eps) if final_norm else nn.Identity())

        self._register_load_state_dict_pre_hook(self._prepare_state_dict)
        self._freeze_stages()

    @property
    def pos_extrapolation(self) -> str:
        """How the position table is laid on another grid, one of :data:`POS_EXTRAPOLATIONS`."""
        return self._pos_extrapolation

    @pos_extrapolation.setter
    def pos_extrapolation(self, value: str) -> None:
        check_choice('pos_extrapolation', value, POS_EXTRAPOLATIONS)
        self._pos_extrapolation = value

    @property
    def context_window(self) -> Optional[Tuple[int, int]]:
        """Linear-InfSA's window (rows, columns) in patch tokens, or None (the whole image)."""
        return self._context_window

    @context_window.setter
    def context_window(self, value: ContextWindow) -> None:
        window = check_context_window(value, TOKEN_WINDOW_UNIT)
        if window is not None and self.attn_type != 'linear':
            raise ValueError(f"context_window applies to attn_type='linear' only, got "
                             f'{self.attn_type!r}; leave it None')
        self._context_window = window

    def init_weights(self) -> None:
        """Initialise the layers from ``init_cfg``, then the CLS token and position table."""
        super().init_weights()
        if not (isinstance(self.init_cfg, dict) and self.init_cfg.get('type') == 'Pretrained'):
            trunc_normal_(self.pos_embed, std=0.02)
            trunc_normal_(self.cls_token, std=0.02)

    def _prepare_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        """On load, rename earlier key names and resize a position table made for another
        image size."""
        for key in [k for k in state_dict if k.startswith(prefix)]:
            local = key[len(prefix):]
            for pattern, new in LEGACY_KEYS:
                if pattern.match(local):
                    state_dict[prefix + pattern.sub(new, local)] = state_dict.pop(key)
        name = prefix + 'pos_embed'
        if name not in state_dict or state_dict[name].shape == self.pos_embed.shape:
            return
        src_tokens = state_dict[name].shape[1] - self.num_extra_tokens
        side = int(round(src_tokens**0.5))
        if side * side != src_tokens:
            raise ValueError(f'cannot infer the grid of a checkpoint pos_embed with '
                             f'{src_tokens} patch tokens; it must be square')
        state_dict[name] = resize_pos_embed(state_dict[name], (side, side), self.patch_resolution,
                                            self.interpolate_mode, self.num_extra_tokens)

    def get_layer_depth(self, param_name: str, prefix: str = '') -> Tuple[int, int]:
        """The layer-wise depth of a parameter, for mmpretrain's layer-wise learning-rate
        decay (``LearningRateDecayOptimWrapperConstructor``, through
        ``ImageClassifier.get_layer_depth``), as mmpretrain's ViT defines it.

        Args:
            param_name (str): The parameter's name in the whole model.
            prefix (str): The backbone's prefix in that model ('backbone.').

        Returns:
            tuple[int, int]: The depth (0 for the patch embedding, CLS token and positions,
            i + 1 for block i, the last for the final norm and whatever is not in the
            backbone) and the number of depths, ``num_layers + 2``.
        """
        num_depths = self.num_layers + 2
        if not param_name.startswith(prefix):
            return num_depths - 1, num_depths
        name = param_name[len(prefix):]
        if name in ('cls_token', 'pos_embed') or name.startswith('patch_embed.'):
            return 0, num_depths
        if name.startswith('blocks.'):
            return int(name.split('.')[1]) + 1, num_depths
        return num_depths - 1, num_depths

    def _stem_parts(self) -> List[Union[nn.Module, nn.Parameter]]:
        return [self.patch_embed, self.drop_after_pos, self.cls_token, self.pos_embed]

    def _embed_setup(self, batch: int, hw_shape: Tuple[int,
                                                       int], token_padding_mask: Optional[Tensor],
                     device: torch.device, whole_grid: bool) -> EmbedSetup:
        """The CLS token with its position, and the positions of the patch rows.

        The whole forward lays the whole table on the grid (``pos_extrapolation``), as the
        reference does; the streamed one takes each band's rows from :class:`BandPosEmbed`,
        which never holds the table (H' * W' * C values, as large as the image's tokens). With
        a padding mask the positions are those of each image's valid region (see
        :func:`pos_embed_for_valid_regions`), so padding a batch further leaves an image's
        tokens unchanged.
        """
        valid_shapes = None
        if token_padding_mask is not None:
            valid_shapes = [tuple(e) for e in valid_extents(token_padding_mask, hw_shape).tolist()]
        if not whole_grid:
            positions = BandPosEmbed(self.pos_embed, self.patch_resolution, hw_shape, valid_shapes,
                                     self.interpolate_mode, self.num_extra_tokens,
                                     self.pos_extrapolation)
        else:
            if valid_shapes is None:
                table = pos_embed_on_grid(self.pos_embed, self.patch_resolution, hw_shape,
                                          self.pos_extrapolation, self.interpolate_mode,
                                          self.num_extra_tokens)
            else:
                table = pos_embed_for_valid_regions(self.pos_embed, self.patch_resolution,
                                                    valid_shapes, hw_shape, self.interpolate_mode,
                                                    self.num_extra_tokens, self.pos_extrapolation)
            positions = TablePosEmbed(table, hw_shape, self.num_extra_tokens)
        return EmbedSetup(self.cls_token.expand(batch, -1, -1) + positions.extra, {}, positions)

    def _embed_rows(self, tokens: Tensor, rows: Tuple[int, int], setup: EmbedSetup) -> Tensor:
        return tokens + setup.context.rows(*rows)

    def _after_embed(self, tokens: Tensor) -> Tensor:
        return self.drop_after_pos(tokens)

    def _block_inputs(self, index: int, extra: Optional[Tensor], hw_shape: Tuple[int, int],
                      state: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        # The attention builds its key mask over [CLS; patches] from the patch mask.
        named = dict(num_extra_tokens=self.num_extra_tokens)
        if self.context_window is not None:
            named.update(hw_shape=hw_shape, context_window=self.context_window)
        return named, state

    def _check_streamable(self) -> None:
        check_streamable(self.attn_type)

    def _stream_workspace_per_token(self) -> BandWorkspace:
        # The MLP's hidden state, its activation (2 F) and its output (C) come out of linear
        # layers (autocast's dtype); the block input, its sum with the attention and the
        # LayerNorm (3 C) stay in the weights' dtype.
        C = self.embed_dims
        mlp = BandWorkspace(
            weight_dtype_values=3 * C,
            autocast_values=2 * self.arch_settings['feedforward_channels'] + C)
        if self.context_window is None:
            return mlp
        # The windowed pass (counted in the weights' dtype, at least float32 as it runs):
        # inputs, their norm and the attention output (3 C), q, k, v and their float32
        # copies (6 C), the query-sum features in float64 and their two running sums
        # (3 x 2 (C + H)), the box sums (2 (C + H)), the central queries, the pooled values
        # and one offset's gathered keys, values and products (5 C).
        H = self.arch_settings['num_heads']
        windowed = 14 * C + 8 * (C + H)
        return max(mlp, BandWorkspace(windowed, 0), key=lambda w: sum(w))

    def _stream_halo_rows(self, grid_rows: int) -> int:
        # The windows of a band reach up to w - 1 rows above and below it.
        if self.context_window is None:
            return 0
        return 2 * (min(self.context_window[0], grid_rows) - 1)

    def forward_attention_maps(self,
                               x: Tensor,
                               padding_mask: Optional[Tensor] = None) -> List[Optional[Tensor]]:
        """Attention weights of every layer, for visualisation and attention-quality metrics.

        Args:
            x (Tensor): (B, in_channels, H, W) images.
            padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels.

        Returns:
            list[Tensor | None]: Per layer, over the 1 + N tokens (CLS first): (B, heads,
            1 + N, 1 + N) for 'pure' (rows of rho * A_hat), 'softmax' and the
            efficient-attention baselines; (B, heads, 1 + N) key weights ``a`` for 'linear';
            None for 'none'.
        """
        return [step.weights for step in self._run_blocks(x, padding_mask, need_weights=True)]
