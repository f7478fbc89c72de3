from .infvit import InfViT
from .timm_vit_features import TimmViTFeatures
from .veca import VECA
from .weightformer import WeightFormer

__all__ = ['InfViT', 'TimmViTFeatures', 'VECA', 'WeightFormer']
