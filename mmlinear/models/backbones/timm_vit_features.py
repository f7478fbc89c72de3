"""Patch-feature maps of a timm ViT, for OpenMMLab dense heads and frozen-backbone baselines."""
from typing import List, Optional, Sequence, Tuple, Union

from mmengine.model import BaseModule
from torch import Tensor

from mmlinear.registry import MODELS
from ..utils import freeze, normalize_indices


@MODELS.register_module()
class TimmViTFeatures(BaseModule):
    """A timm ViT (``forward_intermediates`` over ``blocks``, e.g. DINOv3) giving (B, C, H', W')
    maps of its patch tokens after the final norm, the features that DINOv2 / DINOv3 linear
    evaluations read.

    mmseg's ``TIMMBackbone`` returns timm's ``features_only`` maps, which skip the final norm,
    and loads ``checkpoint_path`` into the feature wrapper, whose keys do not match a
    released file; this loads the checkpoint into the ViT itself and normalises every
    selected block's tokens with the final norm (``forward_intermediates(norm=True)``). The
    class and register tokens are dropped.

    Args:
        model_name (str): A timm model name, e.g. 'vit_base_patch16_dinov3.lvd1689m'.
        checkpoint_path (str, optional): Weights for the ViT (timm's layout, .safetensors or
            .pth). Defaults to None: timm's random initialisation.
        out_indices (int | Sequence[int]): Blocks whose tokens are returned; negative values
            count from the end. Defaults to -1.
        frozen (bool): Freeze every parameter and keep the ViT in eval mode (the frozen
            baseline of linear probes). Defaults to False.
        model_kwargs (dict, optional): More arguments of ``timm.create_model`` (e.g. a
            smaller ``embed_dim`` and ``depth`` for tests). Defaults to None.
    """

    def __init__(self,
                 model_name: str,
                 checkpoint_path: Optional[str] = None,
                 out_indices: Union[int, Sequence[int]] = -1,
                 frozen: bool = False,
                 model_kwargs: Optional[dict] = None) -> None:
        super().__init__()
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
            tuple[Tensor, ...]: One (B, C, H / p, W / p) map per ``out_indices``.
        """
        maps: List[Tensor] = self.vit.forward_intermediates(
            x,
            indices=list(self.out_indices),
            norm=True,
            output_fmt='NCHW',
            intermediates_only=True)
        return tuple(maps)
