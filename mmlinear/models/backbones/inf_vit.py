"""InfViT: a plain ViT whose attention is Infinite Self-Attention (Roffo and Palmer, 2026)."""
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from mmlinear.registry import MODELS
from ..layers import ATTN_TYPES, RHO_MODES, InfViTBlock, PatchEmbed
from ..utils import (check_choice, check_frozen_stages, freeze_modules, normalize_indices,
                     pos_embed_for_valid_regions, resize_pos_embed, resolve_arch,
                     resolve_padding_mask, token_padding_mask, valid_token_grids)

OUT_TYPES = ('featmap', 'cls_token', 'avg_featmap', 'raw')


@MODELS.register_module()
class InfViT(BaseModule):
    """InfViT backbone: CLS token, learned absolute positions, pre-norm blocks.

    Every block mixes tokens with ``attn_type``: Pure InfSA (a Frobenius-normalised ReLU
    attention, one Katz/Neumann hop per layer), Linear-InfSA (an O(N) approximation of the
    attention graph's Perron vector, broadcast to all tokens) or the softmax baseline in the
    same body. The output at the last layer is taken after the final norm (mmpretrain's
    ``final_norm=True`` convention). Any input size works: the patch embedding pads to a
    multiple of the patch size, and the position table is interpolated (bicubic, float32).

    Args:
        arch (str | dict): A preset of ``arch_zoo`` or a dict with ``embed_dims``,
            ``num_layers``, ``num_heads`` and ``feedforward_channels``.
            Defaults to 'infvit-4l'.
        attn_type (str): 'linear', 'pure', 'softmax' or 'none' (no token mixing, an
            ablation control). Defaults to 'linear'.
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
        interpolate_mode (str): Position-table interpolation. Defaults to 'bicubic'.
        frozen_stages (int): Freeze the patch embedding, the CLS token and the position table
            (stage 0) and then the first ``frozen_stages`` layers; -1 freezes nothing.
            Defaults to -1.
        with_cp (bool): Gradient checkpointing of each block (saves memory). Defaults to False.
        init_cfg (dict | list[dict], optional): Initialisation config. Defaults to truncated
            normal (std 0.02) Linear layers, as DeiT.
    """

    arch_zoo: Dict[str, Dict[str, int]] = {
        'infvit-4l': dict(embed_dims=1024, num_layers=4, num_heads=16, feedforward_channels=4096),
        'infvit-24l': dict(embed_dims=1024, num_layers=24, num_heads=16,
                           feedforward_channels=4096),
        # Small presets for CPU demos and tests.
        'infvit-demo': dict(embed_dims=96, num_layers=4, num_heads=4, feedforward_channels=384),
        'infvit-test': dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64),
    }
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
                 interpolate_mode: str = 'bicubic',
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = dict(
                     type='TruncNormal', layer='Linear', std=.02, bias=0.)) -> None:
        super().__init__(init_cfg=init_cfg)
        self.arch_settings = resolve_arch(arch, self.arch_zoo, ('embed_dims', 'num_layers', 'num_heads', 'feedforward_channels'))
        check_choice('attn_type', attn_type, ATTN_TYPES)
        check_choice('rho_mode', rho_mode, RHO_MODES)
        check_choice('out_type', out_type, OUT_TYPES)
        self.embed_dims = self.arch_settings['embed_dims']
        self.num_layers = self.arch_settings['num_layers']
        self.attn_type = attn_type
        self.out_type = out_type
        self.patch_size = patch_size
        self.img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        self.interpolate_mode = interpolate_mode
        self.out_indices = normalize_indices('out_indices', out_indices, self.num_layers)
        self.frozen_stages = check_frozen_stages(frozen_stages, self.num_layers)
        self.with_cp = with_cp

        self.patch_embed = PatchEmbed(in_channels, self.embed_dims, patch_size)
        self.patch_resolution = tuple(-(-s // patch_size) for s in self.img_size)
        num_patches = self.patch_resolution[0] * self.patch_resolution[1]
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        self.pos_embed = nn.Parameter(
            torch.zeros(1, self.num_extra_tokens + num_patches, self.embed_dims))
        self.drop_after_pos = nn.Dropout(drop_rate)

        dpr = torch.linspace(0, drop_path_rate, self.num_layers).tolist()
        self.layers = nn.ModuleList(
            InfViTBlock(
                self.embed_dims,
                self.arch_settings['num_heads'],
                self.arch_settings['feedforward_channels'],
                drop_rate=drop_rate,
                attn_drop_rate=attn_drop_rate,
                drop_path_rate=dpr[i],
                attn_type=attn_type,
                rho_init=rho_init,
                rho_mode=rho_mode,
                qkv_bias=qkv_bias,
                tie_qk=tie_qk) for i in range(self.num_layers))
        self.final_norm = final_norm
        self.ln1 = nn.LayerNorm(self.embed_dims, eps=1e-6) if final_norm else nn.Identity()

        self._register_load_state_dict_pre_hook(self._prepare_pos_embed)
        self._freeze_stages()

    def init_weights(self) -> None:
        """Initialise the layers from ``init_cfg``, then the CLS token and position table."""
        super().init_weights()
        if not (isinstance(self.init_cfg, dict) and self.init_cfg.get('type') == 'Pretrained'):
            trunc_normal_(self.pos_embed, std=0.02)
            trunc_normal_(self.cls_token, std=0.02)

    def _prepare_pos_embed(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        """Resize a checkpoint's position table made for another image size on load."""
        name = prefix + 'pos_embed'
        if name not in state_dict or state_dict[name].shape == self.pos_embed.shape:
            return
        src_tokens = state_dict[name].shape[1] - self.num_extra_tokens
        side = int(round(src_tokens**0.5))
        if side * side != src_tokens:
            raise ValueError(f'cannot infer the grid of a checkpoint pos_embed with '
                             f'{src_tokens} patch tokens; it must be square')
        state_dict[name] = resize_pos_embed(state_dict[name], (side, side),
                                            self.patch_resolution, self.interpolate_mode,
                                            self.num_extra_tokens)

    def _freeze_stages(self) -> None:
        if self.frozen_stages < 0:
            return
        frozen: List[nn.Module] = [self.patch_embed, self.drop_after_pos]
        self.cls_token.requires_grad = False
        self.pos_embed.requires_grad = False
        frozen += list(self.layers[:self.frozen_stages])
        if self.frozen_stages == self.num_layers:
            frozen.append(self.ln1)
        freeze_modules(frozen)

    def train(self, mode: bool = True) -> 'InfViT':
        """Set the training mode, keeping frozen stages in eval mode."""
        super().train(mode)
        self._freeze_stages()
        return self

    def _embed(self, x: Tensor,
               padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tuple[int, int], Optional[Tensor]]:
        """Patch-embed, prepend the CLS token, add positions; derive the token mask.

        With a padding mask the positions are those of each image's valid region (see
        :func:`pos_embed_for_valid_regions`), so padding a batch further leaves an image's
        tokens unchanged.
        """
        B = x.shape[0]
        padding_mask = resolve_padding_mask(x, padding_mask)
        tokens, hw_shape = self.patch_embed(x)
        cls_token = self.cls_token.expand(B, -1, -1)
        tokens = torch.cat([cls_token, tokens], dim=1)
        if padding_mask is None:
            key_padding_mask = None
            pos_embed = resize_pos_embed(self.pos_embed, self.patch_resolution, hw_shape,
                                         self.interpolate_mode, self.num_extra_tokens)
        else:
            patch_mask = token_padding_mask(padding_mask, self.patch_size)
            key_padding_mask = torch.cat([patch_mask.new_zeros(B, 1), patch_mask], dim=1)
            pos_embed = pos_embed_for_valid_regions(self.pos_embed, self.patch_resolution,
                                                    valid_token_grids(patch_mask, hw_shape),
                                                    hw_shape, self.interpolate_mode,
                                                    self.num_extra_tokens)
        return self.drop_after_pos(tokens + pos_embed), hw_shape, key_padding_mask

    def forward(self, x: Tensor, padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, ...]:
        """Args:
            x (Tensor): (B, in_channels, H, W) images, any H, W >= patch_size.
            padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels, with the
                valid region in the top-left corner (as mmdet / mmseg pad); by default the
                mask attached to ``x`` by the mmlinear data preprocessors, if any. Patches made
                only of padding are then excluded from the attention normalisations, the keys
                and 'avg_featmap' pooling, and positions follow each image's valid region.
                Without it the reference behaviour is kept.

        Returns:
            tuple[Tensor, ...]: One entry per ``out_indices``, shaped by ``out_type``:
            (B, C, ceil(H / p), ceil(W / p)) for 'featmap', (B, C) for 'cls_token' and
            'avg_featmap', (B, 1 + N, C) for 'raw'.
        """
        x, hw_shape, key_padding_mask = self._embed(x, padding_mask)
        outs = []
        for i, layer in enumerate(self.layers):
            if self.with_cp and x.requires_grad:
                x = checkpoint(layer, x, key_padding_mask, use_reentrant=False)
            else:
                x = layer(x, key_padding_mask)
            if i == self.num_layers - 1:
                x = self.ln1(x)
            if i in self.out_indices:
                outs.append(self._format_output(x, hw_shape, key_padding_mask))
        return tuple(outs)

    def forward_attention_maps(self, x: Tensor,
                               padding_mask: Optional[Tensor] = None) -> List[Optional[Tensor]]:
        """Attention weights of every layer, for visualisation and attention-quality metrics.

        Args:
            x (Tensor): (B, in_channels, H, W) images.
            padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels.

        Returns:
            list[Tensor | None]: Per layer, over the 1 + N tokens (CLS first): (B, H, 1 + N,
            1 + N) for 'pure' (rows of rho * A_hat) and 'softmax'; (B, H, 1 + N) key weights
            ``a`` for 'linear'; None for 'none'.
        """
        x, _, key_padding_mask = self._embed(x, padding_mask)
        maps = []
        for layer in self.layers:
            x, weights = layer(x, key_padding_mask, need_weights=True)
            maps.append(weights)
        return maps

    def _format_output(self, x: Tensor, hw_shape: Tuple[int, int],
                       key_padding_mask: Optional[Tensor]) -> Tensor:
        if self.out_type == 'raw':
            return x
        if self.out_type == 'cls_token':
            return x[:, 0]
        patch_tokens = x[:, self.num_extra_tokens:]
        if self.out_type == 'featmap':
            B, _, C = patch_tokens.shape
            return patch_tokens.transpose(1, 2).reshape(B, C, *hw_shape)
        if key_padding_mask is None:
            return patch_tokens.mean(dim=1)
        valid = (~key_padding_mask[:, self.num_extra_tokens:]).to(patch_tokens.dtype)
        return (patch_tokens * valid[..., None]).sum(1) / valid.sum(1, keepdim=True).clamp(min=1)
