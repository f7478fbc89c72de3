from .inf_vit import InfViT
from .weightformer import WeightFormer

__all__ = ['InfViT', 'WeightFormer']
