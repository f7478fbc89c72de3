"""Patch-feature maps or class tokens of a timm ViT, for OpenMMLab dense heads, classifiers and
frozen-backbone baselines."""
from typing import List, Optional, Sequence, Tuple, Union

from mmengine.model import BaseModule
from torch import Tensor

from mmlinear.registry import MODELS
from ..utils import freeze, normalize_indices


@MODELS.register_module()
class TimmViTFeatures(BaseModule):
    """A timm ViT (``forward_intermediates`` over ``blocks``, e.g. DINOv3) giving (B, C, H', W')
    maps of its patch tokens, or its (B, C) class token, after the final norm: the features
    that DINOv2 / DINOv3 dense and image-level linear evaluations read.

    mmseg's ``TIMMBackbone`` returns timm's ``features_only`` maps, which skip the final norm,
    and loads ``checkpoint_path`` into the feature wrapper, whose keys do not match a
    released file; this loads the checkpoint into the ViT itself and normalises every
    selected block's tokens with the final norm (``forward_intermediates(norm=True)``). The
    register tokens are dropped, and so is the class token of the maps.

    Args:
        model_name (str): A timm model name, e.g. 'vit_base_patch16_dinov3.lvd1689m'.
        checkpoint_path (str, optional): Weights for the ViT (timm's layout, .safetensors or
            .pth). Defaults to None: timm's random initialisation.
        out_indices (int | Sequence[int]): Blocks whose tokens are returned; negative values
            count from the end. Defaults to -1.
        frozen (bool): Freeze every parameter and keep the ViT in eval mode (the frozen
            baseline of linear probes). Defaults to False.
        out_type (str): 'featmap' (the patch tokens as maps, for dense heads) or 'cls_token'
            (the class token, for an image classifier's neck or head). Defaults to 'featmap'.
        model_kwargs (dict, optional): More arguments of ``timm.create_model`` (e.g. a
            smaller ``embed_dim`` and ``depth`` for tests). Defaults to None.
    """

    OUT_TYPES = ('featmap', 'cls_token')

    def __init__(self,
                 model_name: str,
                 checkpoint_path: Optional[str] = None,
                 out_indices: Union[int, Sequence[int]] = -1,
                 frozen: bool = False,
                 out_type: str = 'featmap',
                 model_kwargs: Optional[dict] = None) -> None:
        super().__init__()
        if out_type not in self.OUT_TYPES:
            raise ValueError(f'out_type must be one of {self.OUT_TYPES}, got {out_type!r}')
        try:
            import timm
        except ImportError as error:
            raise ImportError('TimmViTFeatures needs timm (pip install timm, a release with '
                              'the model you name)') from error
        self.vit = timm.create_model(
            model_name, pretrained=False, checkpoint_path=checkpoint_path, **(model_kwargs or {}))
        if not all(
                hasattr(self.vit, name)
                for name in ('forward_intermediates', 'blocks', 'num_prefix_tokens')):
            raise TypeError(f'{model_name} is not a timm ViT (forward_intermediates, blocks and '
                            f'num_prefix_tokens are needed)')
        self.out_indices = normalize_indices('out_indices', out_indices, len(self.vit.blocks))
        self.out_type = out_type
        self.frozen = frozen
        if frozen:
            freeze([self.vit])

    def init_weights(self) -> None:
        """Nothing to do: timm initialised the ViT and loaded ``checkpoint_path`` when it was
        built (``BaseModule`` would otherwise call the ViT's own ``init_weights`` again and
        overwrite the checkpoint)."""

    def train(self, mode: bool = True) -> 'TimmViTFeatures':
        """Set the mode; a frozen ViT stays in eval mode."""
        super().train(mode)
        if self.frozen:
            self.vit.eval()
        return self

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """Args:
            x (Tensor): (B, 3, H, W) images, H and W multiples of the patch size.

        Returns:
            tuple[Tensor, ...]: One (B, C, H / p, W / p) map ('featmap') or (B, C) class token
            ('cls_token') per ``out_indices``.
        """
        if self.out_type == 'featmap':
            maps: List[Tensor] = self.vit.forward_intermediates(
                x,
                indices=list(self.out_indices),
                norm=True,
                output_fmt='NCHW',
                intermediates_only=True)
            return tuple(maps)
        # Each selected block as (patch map, prefix tokens); the class token leads the prefix.
        blocks = self.vit.forward_intermediates(
            x,
            indices=list(self.out_indices),
            return_prefix_tokens=True,
            norm=True,
            intermediates_only=True)
        return tuple(prefix[:, 0] for _, prefix in blocks)
